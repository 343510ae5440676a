#!/usr/bin/env bash
# Runs the examples of README.md as a newcomer would (issue 41 item 2): every ```sh block,
# verbatim, with `aerotp` on the PATH, in a throwaway copy of the repository's tracked files
# (what a fresh clone holds: no target/, no untracked files), each under a time limit, one
# after the other; whatever a block leaves running in the background is ended after it.
#
# How README.md marks its blocks (the page reads the same either way):
#   ```sh        run
#   ```sh root   run as root only (network namespaces); AEROTP_SKIP_LAB=1 skips it, as it
#                skips the lab tests; otherwise, not root is a failure, not a skip
#   ```text      not run (the quick start and install: release builds of minutes, and
#                scripts/test.sh itself; their own tests are named next to them in README.md)
#   <!-- expect: REGEX -->   right after a block's closing fence: a line of the block's
#                output (stdout and stderr) must match REGEX (grep -E), e.g. that an outage
#                really happened; hidden on the rendered page
# A ```bash, ```shell, ```console or bare ``` block is refused: mark it sh or text.
#
# Usage: scripts/readme-examples.sh [README]   (default README.md)
#        scripts/readme-examples.sh --self-test   (shows that a failing, a slow and an
#                                                  unmet block each fail the run)
# Environment: AEROTP_BIN  the aerotp binary (default: `cargo build --locked -p aerotp`,
#                          then target/debug/aerotp, or under CARGO_TARGET_DIR)
#              AEROTP_EXAMPLE_TIMEOUT  seconds each block may take (default 300; on the
#                          2-core machine the slowest took 12 s in one run and 91 s in
#                          another, under a load average of 7 from other builds and fuzzers)
# Exit status 0 when every block ran and met its expectations, 1 otherwise (each failure is
# printed with its README line, its text, why and the end of its output), 2 for a README
# this script cannot read (a block without its end, an unmarked shell block).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

limit=${AEROTP_EXAMPLE_TIMEOUT:-300}
case $limit in
'' | *[!0-9]*)
    echo "readme-examples: AEROTP_EXAMPLE_TIMEOUT=$limit is not a whole number of seconds" >&2
    exit 2
    ;;
esac

self_test() {
    local t out status
    t=$(mktemp -d)
    trap 'rm -rf "$t"' RETURN
    cat >"$t/README.md" <<'EOF'
# A README

```sh
echo "fine from $(basename "$PWD")"
test -f scripts/test.sh    # the throwaway copy holds the tracked files
aerotp --version
```
<!-- expect: ^fine from run-1$ -->

```text
false    # not run
```

```sh
echo one
false
echo never
```

```sh
sleep 30
```

```sh
echo "an outage: 0 datagrams"
```
<!-- expect: outage: [1-9] -->

```sh
sleep 30 &
echo "left a job behind"
```
EOF
    status=0
    out=$(AEROTP_EXAMPLE_TIMEOUT=3 bash "$0" "$t/README.md" 2>&1) || status=$?
    local want=(
        "README.md:3: ok"
        "README.md:14: FAILED: exit status 1"
        "README.md:20: FAILED: still running after 3 s: stopped"
        "README.md:24: FAILED: no line of its output matches 'outage: [1-9]'"
        "README.md:29: ok"
        "readme-examples: 3 of 5 examples failed"
    )
    local w bad=0
    for w in "${want[@]}"; do
        if ! grep -qF -- "$w" <<<"$out"; then
            echo "readme-examples self-test: the run on $t/README.md did not say: $w" >&2
            bad=1
        fi
    done
    if grep -q "^never$" <<<"$out"; then
        echo "readme-examples self-test: a block went on after a failing command" >&2
        bad=1
    fi
    if [ "$status" -ne 1 ]; then
        echo "readme-examples self-test: exit status $status, want 1" >&2
        bad=1
    fi
    # A shell block that is neither sh nor text is refused before anything runs.
    printf '```bash\necho x\n```\n' >"$t/README.md"
    local refused
    status=0
    refused=$(bash "$0" "$t/README.md" 2>&1) || status=$?
    if [ "$status" -ne 2 ] || ! grep -qF 'README.md:1: a ```bash block' <<<"$refused"; then
        echo "readme-examples self-test: an unmarked block gave exit $status: $refused" >&2
        bad=1
    fi
    if [ "$bad" -ne 0 ]; then
        echo "--- the self-test's run said:" >&2
        echo "$out" >&2
        return 1
    fi
    echo "readme-examples self-test: ok (a failing, a slow and an unmet block fail the run;" \
        "an unmarked block is refused)"
}

if [ "${1:-}" = "--self-test" ]; then
    self_test
    exit
fi

readme=${1:-README.md}
[ -r "$readme" ] || {
    echo "readme-examples: cannot read $readme" >&2
    exit 2
}
name=$(basename "$readme")
# In memory when TMPDIR is not set and /dev/shm is there: a copy of the tree per example
# (50 MB, 7000 files) took 0.3 s there and 21 s on this 2-core machine's busy disk.
base=${TMPDIR:-/tmp}
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    base=/dev/shm
fi
work=$(mktemp -d "$base/aerotp-readme.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The blocks: ex-N.sh (text), and per block its README line, kind and expectations.
lines=()
kinds=()
n=0
count=0
fence=""
last_close=""
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    if [ -n "$fence" ]; then
        if [ "$line" = '```' ]; then
            # Expect lines may follow a run block's closing fence (and each other).
            [ "$fence" = run ] && last_close=$n
            fence=""
        elif [ "$fence" = run ]; then
            printf '%s\n' "$line" >>"$work/ex-$count.sh"
        fi
        continue
    fi
    case $line in
    '```sh' | '```sh root')
        count=$((count + 1))
        lines+=("$n")
        kinds+=("${line#'```sh'}")
        : >"$work/ex-$count.sh"
        : >"$work/ex-$count.expect"
        fence=run
        ;;
    '```' | '```bash'* | '```shell'* | '```console'* | '```zsh'*)
        echo "readme-examples: $name:$n: a ${line} block: fence shell examples as \`\`\`sh (run by" \
            "this script) or \`\`\`text (not run)" >&2
        exit 2
        ;;
    '```'*)
        fence=skip
        ;;
    '<!-- expect: '*' -->')
        if [ "$last_close" != "$((n - 1))" ]; then
            echo "readme-examples: $name:$n: an expect line must follow a \`\`\`sh block's" \
                "closing fence (or another expect line)" >&2
            exit 2
        fi
        re=${line#'<!-- expect: '}
        printf '%s\n' "${re%' -->'}" >>"$work/ex-$count.expect"
        last_close=$n
        ;;
    esac
done <"$readme"
if [ -n "$fence" ]; then
    echo "readme-examples: $name: a block is not closed by the end of the file" >&2
    exit 2
fi
if [ "$count" -eq 0 ]; then
    echo "readme-examples: $name has no \`\`\`sh block: nothing to run" >&2
    exit 1
fi

# The binary the examples call as `aerotp`.
if [ -z "${AEROTP_BIN:-}" ]; then
    echo "readme-examples: cargo build --locked -p aerotp"
    cargo build --locked -p aerotp
    AEROTP_BIN=${CARGO_TARGET_DIR:-$repo/target}/debug/aerotp
fi
[ -x "$AEROTP_BIN" ] || {
    echo "readme-examples: AEROTP_BIN=$AEROTP_BIN is not an executable" >&2
    exit 2
}
mkdir "$work/bin"
ln -s "$(cd "$(dirname "$AEROTP_BIN")" && pwd)/$(basename "$AEROTP_BIN")" "$work/bin/aerotp"

# What a fresh clone holds: the tracked files as they are in the working tree.
mkdir "$work/clone"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work/clone"

failed=0
ran=0
start_all=$SECONDS
for i in $(seq 1 "$count"); do
    where="$name:${lines[$((i - 1))]}"
    kind=${kinds[$((i - 1))]}
    if [ "$kind" = " root" ]; then
        if [ "${AEROTP_SKIP_LAB:-0}" = 1 ]; then
            echo "$where: skipped (needs root; AEROTP_SKIP_LAB=1)"
            continue
        fi
    fi
    ran=$((ran + 1))
    dir="$work/run-$i"
    cp -a "$work/clone" "$dir"
    out="$work/out-$i"
    why=""
    t0=$SECONDS
    if [ "$kind" = " root" ] && [ "$(id -u)" -ne 0 ]; then
        why="needs root (network namespaces): run as root, or set AEROTP_SKIP_LAB=1 to skip it"
        : >"$out"
    else
        # timeout puts itself and the block (background jobs included) in a process group of
        # its own, whose id is its pid: everything left running is ended through it.
        status=0
        (cd "$dir" && PATH="$work/bin:$PATH" exec timeout -k 5 "$limit" \
            bash -e -o pipefail "$work/ex-$i.sh" </dev/null >"$out" 2>&1) &
        group=$!
        wait "$group" || status=$?
        kill -TERM -- "-$group" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 -- "-$group" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$group" 2>/dev/null || true
        if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
            why="still running after $limit s: stopped (AEROTP_EXAMPLE_TIMEOUT)"
        elif [ "$status" -ne 0 ]; then
            why="exit status $status"
        else
            while IFS= read -r re; do
                if ! grep -Eq -- "$re" "$out"; then
                    why="no line of its output matches '$re'"
                    break
                fi
            done <"$work/ex-$i.expect"
        fi
    fi
    rm -rf "$dir"
    if [ -z "$why" ]; then
        echo "$where: ok ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1))
        echo "$where: FAILED: $why"
        echo "  the example:"
        sed 's/^/    /' "$work/ex-$i.sh"
        echo "  the end of its output:"
        tail -n 30 "$out" | sed 's/^/    /'
    fi
done
echo "readme-examples: ran $ran of the $count examples of $name in $((SECONDS - start_all)) s"
if [ "$failed" -gt 0 ]; then
    echo "readme-examples: $failed of $ran examples failed" >&2
    exit 1
fi
