#!/usr/bin/env bash
# Builds MIT-LL's LL-DLEP (a DLEP modem/router nobody on this project wrote) from the snapshot
# in ../shared/third_party, into a cache outside the repository, for crates/dlep's interop
# tests. Idempotent: a finished build is reused (about two minutes on two cores otherwise).
#
#   scripts/build-ll-dlep.sh            # build if needed; last line of output: the binary
#
# Environment:
#   AEROTP_CACHE         cache root (default ~/.cache/aerotp); the build goes to
#                        $AEROTP_CACHE/ll-dlep-184e148
#   AEROTP_SHARED        the shared directory beside the clone (default <repo>/../shared)
#
# Result, in $AEROTP_CACHE/ll-dlep-184e148:
#   bin/Dlep             the example binary (runs as modem or router, CLI on stdin)
#   etc/dlep/*.xml|xsd   its protocol configuration (dlep-rfc-8175.xml, ...)
# The tests find the binary at AEROTP_LL_DLEP (if set) or at that path, and fail when neither
# exists.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${AEROTP_SHARED:-$repo/../shared}
archive="$shared/third_party/LL-DLEP-184e148.tar.gz"
cache=${AEROTP_CACHE:-$HOME/.cache/aerotp}/ll-dlep-184e148
stamp="$cache/.built"

if [ -f "$stamp" ] && [ -x "$cache/bin/Dlep" ]; then
    echo "ll-dlep: already built"
    echo "$cache/bin/Dlep"
    exit 0
fi

if [ ! -f "$archive" ]; then
    echo "ll-dlep: $archive not found (CI has ../shared beside the clone; set AEROTP_SHARED)" >&2
    exit 1
fi

# Debian packages the build needs (../shared/third_party/README.md). Its CMake files require
# doxygen and graphviz's dot even though the tests do not use the documentation.
pkgs=(cmake make g++ libboost-thread-dev libboost-system-dev libboost-test-dev libprotobuf-dev
    protobuf-compiler libxml2-dev libxml2-utils libreadline-dev doxygen graphviz)
missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO="sudo"
        else
            echo "ll-dlep: missing ${missing[*]}; run as root (no sudo found)" >&2
            exit 1
        fi
    fi
    echo "ll-dlep: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A fresh tree every time the stamp is missing: a half-finished earlier build is not trusted.
rm -rf "$cache"
mkdir -p "$cache/src" "$cache/bin" "$cache/etc/dlep"
tar xzf "$archive" -C "$cache/src"
src="$cache/src/LL-DLEP"
# The install prefix is the cache, so the binary's built-in default for its protocol
# configuration (<prefix>/etc/dlep/dlep-rfc-8175.xml) is the copy made below.
cmake -S "$src" -B "$src/out" -DWARNINGS_AS_ERRORS=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$cache" >"$cache/cmake.log" 2>&1 ||
    { tail -n 40 "$cache/cmake.log" >&2; exit 1; }
# Only the example binary and its shared library: the unit tests and doxygen pages are not
# needed here and would double the build time.
jobs=${LL_DLEP_JOBS:-2}
make -C "$src/out" -j"$jobs" Dlep >"$cache/make.log" 2>&1 ||
    { tail -n 60 "$cache/make.log" >&2; exit 1; }
cp "$src"/config/protocol/*.xml "$src"/config/protocol/*.xsd "$cache/etc/dlep/"
# The binary carries the build tree's RPATH (libdlep.so in out/), so a link keeps it working.
ln -sf "$src/out/Dlep" "$cache/bin/Dlep"
touch "$stamp"
echo "ll-dlep: built"
echo "$cache/bin/Dlep"
