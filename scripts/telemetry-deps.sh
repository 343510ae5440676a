#!/usr/bin/env bash
# Install the Python libraries the telemetry tools and tests use (tools/telemetry/,
# crates/gw/tests/telemetry.rs, docs/telemetry.md): pychapter10 (IRIG 106 Chapter 10
# packets) and AcraNetwork (IRIG 106 Chapter 24 TmNS messages), pinned in
# tools/telemetry/requirements.txt, into the virtual environment tools/telemetry/.venv
# (nothing goes into the system Python). The tools and tests run its interpreter,
# tools/telemetry/.venv/bin/python, printed on the last line. Idempotent: reinstalls only
# when requirements.txt changed; needs network access to PyPI the first time.
# Env: PYTHON=python3.11 chooses the interpreter the venv is made from (default python3).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
here="$root/tools/telemetry"
PY=${PYTHON:-python3}
venv="$here/.venv"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "telemetry-deps: $PY not found: install python3 (scripts/lab-deps.sh does)" >&2
    exit 1
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    # Debian splits venv/ensurepip into python3-venv.
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    else
        echo "telemetry-deps: $PY lacks venv/ensurepip; install python3-venv" >&2
        exit 1
    fi
fi
if [ ! -x "$venv/bin/python" ]; then
    "$PY" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "telemetry-deps: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -c "import chapter10, AcraNetwork" \
    || { echo "telemetry-deps: chapter10 or AcraNetwork missing from $venv after pip install" >&2; exit 1; }
echo "telemetry-deps: ok" >&2
echo "$venv/bin/python"
