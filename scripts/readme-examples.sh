#!/usr/bin/env bash
# Runs the examples of README.md as a newcomer would (issue 41 item 2): every ```sh block,
# verbatim, with `aerotp` on the PATH, in a throwaway copy of the repository's tracked files
# (what a fresh clone holds: no target/, no untracked files), each under a time limit, one
# after the other; whatever a block leaves running in the background is ended after it.
# `cargo install` installs into a throwaway CARGO_INSTALL_ROOT, not into ~/.cargo/bin.
#
# How README.md marks its blocks (the page reads the same either way): ```sh, then any of
# the words root, repo, suite:
#   ```sh        run, in a throwaway copy of the tracked files
#   root         as root only (network namespaces, dpkg); AEROTP_SKIP_LAB=1 skips it, as it
#                skips the lab tests; otherwise, not root is a failure, not a skip
#   repo         in the repository itself instead of a copy (as on a fresh clone, where a
#                newcomer types it): for the blocks that build, whose release builds then land
#                in target/, where the suite's own release build (scripts/package-test.sh)
#                and every later run reuse them. A copy would build from nothing, and the
#                aerotp crate's build script, which names the commit from the tree it sits
#                in, would make every switch between copy and repository rebuild it (fat LTO,
#                minutes). Such a block must write nothing but target/ and the install root.
#   suite        the block holds the suite's command, `scripts/test.sh`, on a line of its own
#                (a trailing comment allowed): that line is not run, as it is the suite in
#                progress (scripts/test.sh runs this script: it would recurse) and CI runs it
#                anyway. It is checked instead: it must be the command .ci/run execs (minus
#                `exec` and `bash`), and executable as the README calls it. A suite block
#                without that line, or that line in a block not marked suite, is refused.
#   ```text      not run (output, configuration, diagrams)
#   <!-- expect: REGEX -->   right after a block's closing fence: a line of the block's
#                output (stdout and stderr) must match REGEX (grep -E), e.g. that an outage
#                really happened; hidden on the rendered page
#   <!-- timeout: SECONDS -->   likewise: this block's time limit instead of
#                AEROTP_EXAMPLE_TIMEOUT's (a release build from nothing takes 6 to 11 minutes)
# A ```bash, ```shell, ```console or bare ``` block is refused: mark it sh or text.
#
# Usage: scripts/readme-examples.sh [README]   (default README.md)
#        scripts/readme-examples.sh --self-test   (shows that a failing, a slow and an
#                                                  unmet block each fail the run, and the
#                                                  markers do what is written above)
# Environment: AEROTP_BIN  the aerotp binary (default: `cargo build --locked -p aerotp`,
#                          then target/debug/aerotp, or under CARGO_TARGET_DIR)
#              AEROTP_EXAMPLE_TIMEOUT  seconds each block may take (default 300; on the
#                          2-core machine the slowest took 12 s in one run and 91 s in
#                          another, under a load average of 7 from other builds and fuzzers)
#              CARGO_TARGET_DIR  passed on: the README's target/debian/ path then does not
#                          find the package (CI leaves it unset)
# Exit status 0 when every block ran and met its expectations, 1 otherwise (each failure is
# printed with its README line, its text, why and the end of its output), 2 for a README
# this script cannot read (a block without its end, an unmarked shell block, an unknown
# marker, a suite line that is not the suite's command).
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
echo "install root: $CARGO_INSTALL_ROOT"
```
<!-- expect: ^fine from run-1$ -->
<!-- expect: ^install root: .*/aerotp-readme\.[^/]+/cargo-install$ -->

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

```sh
sleep 4
echo "slow, and allowed to be"
```
<!-- timeout: 9 -->
<!-- expect: ^slow, and allowed to be$ -->
EOF
    status=0
    out=$(AEROTP_EXAMPLE_TIMEOUT=3 bash "$0" "$t/README.md" 2>&1) || status=$?
    local want=(
        "README.md:3: ok"
        "README.md:16: FAILED: exit status 1"
        "README.md:22: FAILED: still running after 3 s: stopped"
        "README.md:26: FAILED: no line of its output matches 'outage: [1-9]'"
        "README.md:31: ok"
        "README.md:36: ok"
        "readme-examples: 3 of 6 examples failed"
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
    # The repo and suite markers, in a repository of its own (under $t) whose .ci/run runs a
    # stand-in suite that says so and fails: the suite's line must be checked, not run, and
    # the block must run in the repository (which has .git; a copy has not).
    local r="$t/repo" suite_out
    [ -n "$t" ] && [ -d "$t" ] || return 1
    mkdir -p "$r/.ci" "$r/scripts"
    cp "$0" "$r/scripts/readme-examples.sh"
    printf '#!/bin/sh\nexec bash scripts/suite.sh\n' >"$r/.ci/run"
    printf '#!/bin/sh\necho "the suite ran"\nexit 1\n' >"$r/scripts/suite.sh"
    chmod +x "$r/.ci/run" "$r/scripts/suite.sh"
    cat >"$r/README.md" <<'EOF'
```sh repo suite
test -e .git && echo "in the repository"
scripts/suite.sh    # the suite: checked, not run
echo "after the suite line"
```
<!-- expect: ^in the repository$ -->
<!-- expect: ^after the suite line$ -->
EOF
    git -C "$r" init -q && git -C "$r" add README.md .ci scripts
    status=0
    suite_out=$(AEROTP_BIN=$(type -P true) bash "$r/scripts/readme-examples.sh" "$r/README.md" 2>&1) ||
        status=$?
    if [ "$status" -ne 0 ] || grep -q "the suite ran" <<<"$suite_out" ||
        ! grep -qF "README.md:1: ok" <<<"$suite_out" ||
        ! grep -qF "its scripts/suite.sh line is the suite: checked, not run" <<<"$suite_out"; then
        echo "readme-examples self-test: the repo suite block gave exit $status: $suite_out" >&2
        bad=1
    fi
    # Refused before anything runs (exit 2, saying why): a shell block that is neither sh nor
    # text, an unknown marker, the suite's script in a block not marked suite, another command
    # of it in a suite block, a suite block without it.
    local refusals=(
        '```bash\necho x\n```\n|README.md:1: a ```bash block'
        '```sh rot\necho x\n```\n|unknown marker '"'rot'"
        '```sh\nscripts/suite.sh\n```\n|mark its block ```sh suite'
        '```sh suite\nscripts/suite.sh --quick\n```\n|is not the suite'"'"'s command'
        '```sh suite\necho x\n```\n|on exactly one line; it has 0'
    )
    local case refused
    for case in "${refusals[@]}"; do
        # shellcheck disable=SC2059 # the case is the format: its \n are the README's lines
        printf "${case%%|*}" >"$r/README.md"
        status=0
        refused=$(bash "$r/scripts/readme-examples.sh" "$r/README.md" 2>&1) || status=$?
        if [ "$status" -ne 2 ] || ! grep -qF -- "${case#*|}" <<<"$refused"; then
            echo "readme-examples self-test: ${case%%|*} gave exit $status: $refused" >&2
            bad=1
        fi
    done
    if [ "$bad" -ne 0 ]; then
        echo "--- the self-test's run said:" >&2
        echo "$out" >&2
        return 1
    fi
    echo "readme-examples self-test: ok (a failing, a slow and an unmet block fail the run;" \
        "a timeout line lets a block run longer; a repo block runs in the repository; the" \
        "suite's line is checked, not run; an unmarked block, an unknown marker and a suite" \
        "line that is not the suite's command are refused)"
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

# The suite's command, which a ```sh suite block's line is checked against: what .ci/run
# execs, minus `exec` and `bash` (.ci/run: `exec bash scripts/test.sh`).
suite_cmd=""
if [ -r "$repo/.ci/run" ]; then
    suite_cmd=$(sed -nE 's/^exec +(bash +)?//p' "$repo/.ci/run" | tail -n 1)
fi
suite_script=${suite_cmd%% *}

refuse() { # $1 README line, $2... why
    local at=$1
    shift
    echo "readme-examples: $name:$at: $*" >&2
    exit 2
}

# The blocks: ex-N.sh (text), and per block its README line, markers, time limit and
# expectations.
lines=()
kinds=()
limits=()
n=0
count=0
fence=""
kind=""
suite_lines=0
last_close=""
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    if [ -n "$fence" ]; then
        if [ "$line" = '```' ]; then
            # Expect and timeout lines may follow a run block's closing fence (and each other).
            if [ "$fence" = run ]; then
                last_close=$n
                if [[ $kind == *" suite"* ]] && [ "$suite_lines" -ne 1 ]; then
                    refuse "${lines[$((count - 1))]}" "a \`\`\`sh suite block must hold the suite's command" \
                        "'$suite_cmd' (what .ci/run runs) on exactly one line; it has $suite_lines"
                fi
            fi
            fence=""
        elif [ "$fence" = run ]; then
            # The command of the line, without a trailing comment or surrounding blanks.
            cmd=${line%%#*}
            cmd=${cmd#"${cmd%%[![:space:]]*}"}
            cmd=${cmd%"${cmd##*[![:space:]]}"}
            # Does it run the suite's script (as a command, or through bash, sh or sudo)?
            first=$cmd
            while [[ $first == sudo\ * || $first == bash\ * || $first == sh\ * ]]; do
                first=${first#* }
                first=${first#"${first%%[![:space:]]*}"}
            done
            first=${first#./}
            first=${first%% *}
            if [ -n "$suite_script" ] && [ "$first" = "$suite_script" ]; then
                [[ $kind == *" suite"* ]] || refuse "$n" "'$cmd' runs the suite, which runs this" \
                    "script: mark its block \`\`\`sh suite (then it is checked, not run)"
                [ "$cmd" = "$suite_cmd" ] || refuse "$n" "'$cmd' is not the suite's command" \
                    "'$suite_cmd' (what .ci/run runs)"
                [ -x "$repo/$suite_script" ] || refuse "$n" "$suite_script is not executable" \
                    "(the README runs it as a command)"
                suite_lines=$((suite_lines + 1))
                printf ': # the suite itself, checked and not run (readme-examples.sh): %s\n' \
                    "$line" >>"$work/ex-$count.sh"
            else
                printf '%s\n' "$line" >>"$work/ex-$count.sh"
            fi
        fi
        continue
    fi
    case $line in
    '```sh' | '```sh '*)
        kind=""
        read -ra words <<<"${line#'```sh'}"
        for word in "${words[@]}"; do
            case $word in
            root | repo | suite) kind="$kind $word" ;;
            *) refuse "$n" "unknown marker '$word' on a \`\`\`sh block (root, repo, suite)" ;;
            esac
        done
        if [[ $kind == *" suite"* ]] && [ -z "$suite_cmd" ]; then
            refuse "$n" "a \`\`\`sh suite block, but $repo/.ci/run has no exec line naming the" \
                "suite's command to check it against"
        fi
        count=$((count + 1))
        lines+=("$n")
        kinds+=("$kind")
        limits+=("$limit")
        suite_lines=0
        : >"$work/ex-$count.sh"
        : >"$work/ex-$count.expect"
        fence=run
        ;;
    '```' | '```bash'* | '```shell'* | '```console'* | '```zsh'*)
        refuse "$n" "a ${line} block: fence shell examples as \`\`\`sh (run by this script) or" \
            "\`\`\`text (not run)"
        ;;
    '```'*)
        fence=skip
        ;;
    '<!-- expect: '*' -->' | '<!-- timeout: '*' -->')
        if [ "$last_close" != "$((n - 1))" ]; then
            refuse "$n" "an expect or timeout line must follow a \`\`\`sh block's closing fence" \
                "(or another such line)"
        fi
        value=${line#'<!-- '*': '}
        value=${value%' -->'}
        case $line in
        '<!-- expect: '*) printf '%s\n' "$value" >>"$work/ex-$count.expect" ;;
        *)
            case $value in
            '' | *[!0-9]*) refuse "$n" "timeout '$value' is not a whole number of seconds" ;;
            esac
            limits[count - 1]=$value
            ;;
        esac
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
# A copy, not a link: a block may rebuild target/debug/aerotp with other features (the
# install block's scripts/package.sh runs a field build with `--features assets` to write the
# man pages), and the blocks after it must still run the binary the README describes.
cp "$AEROTP_BIN" "$work/bin/aerotp"

# What a fresh clone holds: the tracked files as they are in the working tree.
mkdir "$work/clone"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work/clone"

# `cargo install` in a block installs here, not into ~/.cargo/bin.
export CARGO_INSTALL_ROOT="$work/cargo-install"

failed=0
ran=0
start_all=$SECONDS
for i in $(seq 1 "$count"); do
    where="$name:${lines[$((i - 1))]}"
    kind=${kinds[$((i - 1))]}
    block_limit=${limits[$((i - 1))]}
    if [[ $kind == *" root"* ]] && [ "${AEROTP_SKIP_LAB:-0}" = 1 ]; then
        echo "$where: skipped (needs root; AEROTP_SKIP_LAB=1)"
        continue
    fi
    ran=$((ran + 1))
    if [[ $kind == *" repo"* ]]; then
        dir=$repo
    else
        dir="$work/run-$i"
        cp -a "$work/clone" "$dir"
    fi
    out="$work/out-$i"
    why=""
    t0=$SECONDS
    if [[ $kind == *" root"* ]] && [ "$(id -u)" -ne 0 ]; then
        why="needs root (network namespaces, dpkg): run as root, or set AEROTP_SKIP_LAB=1 to skip it"
        : >"$out"
    else
        # timeout puts itself and the block (background jobs included) in a process group of
        # its own, whose id is its pid: everything left running is ended through it.
        status=0
        (cd "$dir" && PATH="$work/bin:$PATH" exec timeout -k 5 "$block_limit" \
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
            why="still running after $block_limit s: stopped (AEROTP_EXAMPLE_TIMEOUT, or the block's timeout line)"
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
    [[ $kind == *" repo"* ]] || rm -rf "$dir"
    if [ -z "$why" ]; then
        note=""
        [[ $kind != *" suite"* ]] || note="; its $suite_cmd line is the suite: checked, not run"
        echo "$where: ok ($((SECONDS - t0)) s$note)"
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
