#!/usr/bin/env bash
# Idempotent, non-interactive setup of the ns-3 Python bindings for bench/ns3.
# Creates bench/ns3/.venv (python3 -m venv) and installs requirements.txt into it.
# Usage: bash bench/ns3/setup.sh        -> prints the venv python path on the last line
# Env:   PYTHON=python3.11 to choose the interpreter (default python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"

if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  # Debian splits venv/ensurepip into python3-venv.
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
  else
    echo "setup.sh: $py lacks venv/ensurepip; install python3-venv" >&2
    exit 1
  fi
fi

if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi

if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-cache-dir -q --upgrade pip
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-cache-dir -q -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi

# The first import compiles cppyy's precompiled header (~15 s); do it once here.
"$venv/bin/python" -c 'from ns import ns; print("ns-3 bindings OK")' >&2
echo "$venv/bin/python"
