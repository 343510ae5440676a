#!/usr/bin/env bash
# Install what `aerotp lab` and its tests use: iproute2 (`ip netns`, `ip addr`),
# iputils-ping (ping inside the namespaces), curl and python3 (ad-hoc traffic), and tshark
# (the Wireshark dissector's test in crates/capture decodes the captures it writes), and
# nftables (`nft`: `aerotp gw rules` installs the transparent gateway's TPROXY rules), and
# prometheus (`promtool check metrics` judges every /metrics exposition in the metrics tests,
# crates/testkit/src/prom.rs).
# Idempotent: installs only what is missing; needs root (or sudo) and apt-get.
set -euo pipefail

declare -A probe=(
    [iproute2]=ip
    [iputils-ping]=ping
    [curl]=curl
    [python3]=python3
    [tshark]=tshark
    [nftables]=nft
    [prometheus]=promtool
)

missing=()
for pkg in "${!probe[@]}"; do
    if ! command -v "${probe[$pkg]}" >/dev/null 2>&1; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "lab-deps: iproute2, iputils-ping, curl, python3, tshark, nftables, prometheus already present"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "lab-deps: missing ${missing[*]} and apt-get is not available: install them with this system's package manager" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "lab-deps: missing ${missing[*]}; run this script as root (no sudo found)" >&2
        exit 1
    fi
fi

echo "lab-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: answer "no" ahead of time, so the
# install never waits for input (the tests only read files).
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
