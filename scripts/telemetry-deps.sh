#!/usr/bin/env bash
# Install the Python libraries the telemetry tools and tests use (tools/telemetry/,
# crates/gw/tests/telemetry.rs, docs/telemetry.md): pychapter10 (IRIG 106 Chapter 10
# packets) and AcraNetwork (IRIG 106 Chapter 24 TmNS messages), pinned, for the `python3`
# on PATH (the one the tests run). Idempotent: installs only what is missing or at another
# version; needs network access to PyPI the first time.
set -euo pipefail

PY=${PYTHON:-python3}
want=("pychapter10==1.1.19" "AcraNetwork==1.3.15")

have() {
    "$PY" - "$@" <<'PYEOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for spec in sys.argv[1:]:
    name, v = spec.split("==")
    try:
        if version(name) != v:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PYEOF
}

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "telemetry-deps: $PY not found: install python3 (scripts/lab-deps.sh does)" >&2
    exit 1
fi
if have "${want[@]}"; then
    echo "telemetry-deps: ${want[*]} already present for $("$PY" -c 'import sys; print(sys.executable)')"
    exit 0
fi
echo "telemetry-deps: installing ${want[*]}"
if ! "$PY" -m pip install --quiet --disable-pip-version-check "${want[@]}"; then
    # A distribution's own python3 may refuse pip installs (PEP 668); these tests run as
    # root on a throwaway machine, where installing beside the system packages is harmless.
    "$PY" -m pip install --quiet --disable-pip-version-check --break-system-packages "${want[@]}"
fi
have "${want[@]}" || { echo "telemetry-deps: ${want[*]} still missing after pip install" >&2; exit 1; }
"$PY" -c "import chapter10, AcraNetwork" && echo "telemetry-deps: ok"
