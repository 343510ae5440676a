#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need, then formatting, lints,
# every Rust test (engine, simulator, runtime, lab in network namespaces) and the ns-3 peers'
# self-check. Run from anywhere; needs root for the lab tests (set AEROTP_SKIP_LAB=1 to skip
# them explicitly) and network access to crates.io, PyPI and Debian for the first run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "system packages for the lab tests"
if [ "${AEROTP_SKIP_LAB:-0}" != "1" ]; then
    bash scripts/lab-deps.sh
    bash scripts/telemetry-deps.sh
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

step "cargo test (workspace)"
cargo test --workspace --locked

if [ "${AEROTP_SKIP_NS3:-0}" != "1" ]; then
    step "ns-3 TCP peers: install and self-check"
    bash bench/ns3/setup.sh
    bench/ns3/.venv/bin/python -m pytest -q bench/ns3/test_tcp_lossy.py
fi

step "all tests passed"
