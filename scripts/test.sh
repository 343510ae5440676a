#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need, then formatting, lints,
# every Rust test (engine, simulator, runtime, lab in network namespaces), the README's
# examples and the ns-3 peers' self-check. Run from anywhere; needs root for the lab tests
# (set AEROTP_SKIP_LAB=1 to skip them explicitly) and network access to crates.io, PyPI and
# Debian for the first run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "free disk space"
# A clean build plus the ns-3 wheel needs about 6 GB; say so up front instead of failing
# half-way with ENOSPC.
need_kib=$((6 * 1024 * 1024))
have_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
have_tmp_kib=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }')
echo "free: $((have_kib / 1024)) MiB here, $((have_tmp_kib / 1024)) MiB in ${TMPDIR:-/tmp}"
if [ "$have_kib" -lt "$need_kib" ] || [ "$have_tmp_kib" -lt $((1024 * 1024)) ]; then
    echo "not enough free disk: the tests need about 6 GiB here and 1 GiB in ${TMPDIR:-/tmp};" \
        "free some (an old target/ directory is the usual culprit) and re-run" >&2
    exit 1
fi

step "system packages for the lab tests"
if [ "${AEROTP_SKIP_LAB:-0}" != "1" ]; then
    bash scripts/lab-deps.sh
    bash scripts/telemetry-deps.sh
    if [ "$(id -u)" -eq 0 ] && ! command -v sudo >/dev/null 2>&1; then
        # README.md's package block says `sudo dpkg -i`, and the README step runs it verbatim
        # (as root, where a container often has no sudo).
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sudo
    fi
elif ! command -v tshark >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    # The dissector test needs tshark even when the lab tests are skipped.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "structure: no import cycle among modules, no source file over 800 lines"
python3 scripts/check-module-cycles.py --self-test
python3 scripts/check-module-cycles.py

step "LL-DLEP, the modem crates/dlep's interop tests run against (built once, cached outside the repo)"
bash scripts/build-ll-dlep.sh

step "cargo test (workspace)"
# Every target runs (--no-fail-fast). The integration tests that drive real sockets, child
# processes and network namespaces on this shared machine (crates below, `--test` targets
# only) get one re-run if they fail, and a pass on it is reported as flaky, by name, at the
# end; a second failure, any other failing target (unit tests and everything in virtual time
# are deterministic), or a build error fails the run.
real_io_crates=" aerotp aerotp-gw aerotp-net aerotp-lab aerotp-labbench aerotp-emu aerotp-capture aerotp-dlep "
test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
if ! cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$test_log"; then
    mapfile -t failed < <(grep -oE '`-p [a-z0-9_-]+ --[a-z]+ ?[A-Za-z0-9_-]*`' "$test_log" | tr -d '`' | sort -u)
    if [ "${#failed[@]}" -eq 0 ]; then
        echo "cargo test failed before any test target failed (a build error?): see above" >&2
        exit 1
    fi
    flaky=()
    for target in "${failed[@]}"; do
        read -r _ crate kind _ <<<"$target"
        if [ "$kind" != "--test" ] || [[ "$real_io_crates" != *" $crate "* ]]; then
            echo "test target failed: $target (deterministic: no re-run)" >&2
            exit 1
        fi
    done
    for target in "${failed[@]}"; do
        step "re-run of the failed real-I/O test target: cargo test --locked $target"
        # shellcheck disable=SC2086 # the target is several words on purpose
        if ! cargo test --locked $target; then
            echo "test target failed twice: $target" >&2
            exit 1
        fi
        flaky+=("$target")
    done
    for target in "${flaky[@]}"; do
        echo "flaky: $target failed once and passed on its re-run (first run's output above)"
    done
fi

step "README examples: every sh block of README.md, verbatim, as on a fresh clone"
# scripts/readme-examples.sh: its self-test first (a failing, a slow and an unmet block fail
# it; the markers do what it says), then README.md with the debug build as `aerotp`. The
# quick start (`cargo run --release -p aerotp -- demo`) and the install blocks (`cargo
# install`, into a throwaway root; scripts/package.sh, dpkg -i, dpkg --purge) run in this
# tree, so they make the suite's two release builds, default and field, in target/: the
# package step below finds both done. The quick start's scripts/test.sh line is this script:
# checked to be what .ci/run runs, not run again. Blocks that need root are skipped with
# AEROTP_SKIP_LAB=1, as the lab tests are.
bash scripts/readme-examples.sh --self-test
bash scripts/readme-examples.sh

if [ "${AEROTP_SKIP_PACKAGE:-0}" != "1" ]; then
    step "Debian package of the field binary: build, dpkg -i, run, systemd-analyze verify, purge"
    # docs/packaging.md; as root (dpkg -i on this machine). AEROTP_SKIP_PACKAGE=1 skips it.
    # Its scripts/package.sh reuses the README step's field build (cargo finds it fresh).
    bash scripts/package-test.sh
fi

if [ "${AEROTP_SKIP_NS3:-0}" != "1" ]; then
    step "ns-3 TCP peers: install and self-check"
    bash bench/ns3/setup.sh
    bench/ns3/.venv/bin/python -m pytest -q bench/ns3/test_tcp_lossy.py
fi

step "all tests passed"
