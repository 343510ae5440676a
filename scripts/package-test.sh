#!/usr/bin/env bash
# The Debian package, end to end (docs/packaging.md): builds it with scripts/package.sh,
# checks it with dpkg-deb, installs it on this machine with dpkg -i (needs root), runs the
# installed binary, verifies the systemd units with systemd-analyze verify, starts each
# unit's command line briefly as the aerotp user, then removes and purges it and checks that
# nothing it installed is left. Refuses to run where an aerotp package or /usr/bin/aerotp
# already exists. CI runs it from scripts/test.sh (AEROTP_SKIP_PACKAGE=1 skips it there).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    echo "package-test: FAIL: $*" >&2
    exit 1
}
say() { echo "package-test: $*"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i); run as root or set AEROTP_SKIP_PACKAGE=1"
case $(dpkg-query -W -f='${Status}' aerotp 2>/dev/null || true) in
"" | *not-installed) ;;
*) fail "an aerotp package is already on this machine; not touching it (left by a killed run of" \
    "this test? then dpkg --purge aerotp and run again)" ;;
esac
[ ! -e /usr/bin/aerotp ] || fail "/usr/bin/aerotp exists and is not from the package; not touching it"
getent passwd aerotp >/dev/null && fail "a user aerotp exists already; not touching it"
# What the package and this test use, installed if missing (Debian package: command).
declare -A probe=([systemd]=systemd-analyze [binutils]=objdump [man-db]=man [adduser]=adduser
    [zsh]=zsh [fish]=fish)
missing=()
for pkg in "${!probe[@]}"; do
    command -v "${probe[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

deb=$(bash scripts/package.sh | tail -n 1)
[ -f "$deb" ] || fail "scripts/package.sh wrote no package"
case $(basename "$deb") in
aerotp_*_"$(dpkg --print-architecture)".deb) ;;
*) fail "package name $(basename "$deb") is not aerotp_VERSION_ARCH.deb" ;;
esac

say "dpkg-deb --info"
info=$(dpkg-deb --info "$deb")
echo "$info" | sed 's/^/    /'
for field in 'Package: aerotp' 'Depends: libc6 (>= ' 'adduser'; do
    grep -qF "$field" <<<"$info" || fail "control lacks '$field'"
done
for script in postinst prerm postrm conffiles; do
    grep -qE "^ +[0-9]+ bytes, +[0-9]+ lines +\*? *$script" <<<"$info" || fail "no $script"
done

say "dpkg-deb --contents"
contents=$(dpkg-deb --contents "$deb" | awk '{ print $NF }' | sed 's|^\./|/|')
expected=(
    /usr/bin/aerotp
    /usr/lib/systemd/system/aerotp-gw-ingress@.service
    /usr/lib/systemd/system/aerotp-gw-egress@.service
    /usr/lib/systemd/system/aerotp-recv@.service
    /etc/aerotp/ingress.toml
    /etc/aerotp/egress.toml
    /etc/aerotp/recv.env
    /usr/share/man/man1/aerotp.1.gz
    /usr/share/man/man1/aerotp-send.1.gz
    /usr/share/man/man1/aerotp-recv.1.gz
    /usr/share/man/man1/aerotp-gw-ingress.1.gz
    /usr/share/man/man1/aerotp-gw-egress.1.gz
    /usr/share/man/man1/aerotp-keygen.1.gz
    /usr/share/man/man1/aerotp-link.1.gz
    /usr/share/bash-completion/completions/aerotp
    /usr/share/zsh/vendor-completions/_aerotp
    /usr/share/fish/vendor_completions.d/aerotp.fish
    /usr/share/doc/aerotp/copyright
)
for f in "${expected[@]}"; do
    grep -qxF "$f" <<<"$contents" || fail "the package lacks $f"
done
# The pages and completions describe the field binary: no development command.
for dev in sim experiment trace demo bench lab; do
    ! grep -qxF "/usr/share/man/man1/aerotp-$dev.1.gz" <<<"$contents" ||
        fail "a man page for the development command $dev"
done
installed_files=$(grep -vE '/$' <<<"$contents")

say "dpkg -i"
cleanup() { dpkg --purge aerotp >/dev/null 2>&1 || true; }
trap cleanup EXIT
dpkg -i "$deb"

say "the installed binary"
[ "$(command -v aerotp)" = /usr/bin/aerotp ] || fail "aerotp is not /usr/bin/aerotp on the PATH"
version=$(aerotp --version)
say "aerotp --version: $version"
grep -qE '^aerotp [0-9]+\.[0-9]+\.[0-9]+ \(([0-9a-f]{7,}(-dirty)?|unknown)\)$' <<<"$version" ||
    fail "--version does not name the commit: $version"
aerotp send --help >/dev/null || fail "aerotp send --help"
for cmd in recv gw keygen link; do
    aerotp "$cmd" --help >/dev/null || fail "aerotp $cmd --help"
done
! aerotp sim --help >/dev/null 2>&1 || fail "the installed binary has the simulator (not the field build)"
size=$(stat -c %s /usr/bin/aerotp)
say "/usr/bin/aerotp: $size bytes"
[ "$size" -le $((15 * 1024 * 1024)) ] || fail "the field binary is over 15 MiB"
# Stripped: no symbol table, no DWARF (rustc's .debug_gdb_scripts is loaded and stays).
sections=$(objdump -h /usr/bin/aerotp)
! grep -qE '\.(symtab|debug_(info|line|abbrev|str))\b' <<<"$sections" || fail "/usr/bin/aerotp is not stripped"
man -w aerotp-gw-ingress >/dev/null || fail "man aerotp-gw-ingress not found"
# Each shell's completion, loaded from where the package put it, offers the field commands
# after `aerotp ` and nothing of the development build.
check_commands() { # $1 shell, $2 its candidates, one a line
    for c in send recv gw keygen link; do
        grep -qx -- "$c" <<<"$2" || fail "the $1 completion does not offer $c: $2"
    done
    ! grep -qxE 'sim|experiment|trace|demo|bench|lab' <<<"$2" || fail "the $1 completion offers a development command"
}
check_commands bash "$(bash -c 'source /usr/share/bash-completion/completions/aerotp
    COMP_WORDS=(aerotp ""); COMP_CWORD=1; COMP_LINE="aerotp "; COMP_POINT=7
    _aerotp aerotp "" aerotp; printf "%s\n" "${COMPREPLY[@]}"')"
check_commands fish "$(fish -c 'complete -C "aerotp "' | cut -f1)"
[ "$(zsh -fc 'autoload -U compinit; compinit -u -D; print -r -- ${_comps[aerotp]}')" = _aerotp ] ||
    fail "zsh does not find _aerotp in its vendor-completions"
zsh -n /usr/share/zsh/vendor-completions/_aerotp || fail "the zsh completion does not parse"

say "user, state and configuration"
getent passwd aerotp >/dev/null || fail "postinst made no aerotp user"
[ "$(stat -c %U:%a /var/lib/aerotp)" = aerotp:750 ] || fail "/var/lib/aerotp: $(stat -c %U:%a /var/lib/aerotp)"
[ "$(stat -c %U:%G:%a /etc/aerotp)" = root:aerotp:750 ] || fail "/etc/aerotp: $(stat -c %U:%G:%a /etc/aerotp)"
[ "$(dpkg-query -W -f='${Conffiles}\n' aerotp | grep -c /etc/aerotp/)" -eq 3 ] || fail "conffiles"

say "systemd-analyze verify (one instance of each template)"
units=(aerotp-gw-ingress@ingress.service aerotp-gw-egress@egress.service aerotp-recv@recv.service)
# It loads the units from the system's unit path, checks every directive, that the
# ExecStart binary exists and that the Documentation= man pages are installed.
analysis=$(systemd-analyze verify "${units[@]}" 2>&1) || fail "systemd-analyze verify: $analysis"
! grep -i aerotp <<<"$analysis" || fail "systemd-analyze verify warns about the units"

# Each unit's command line, as the unit runs it (user aerotp, its state directory), for two
# seconds: still running then means the configuration was accepted and the sockets bound.
# The gateways' addresses are overridden by flags (the shipped ones are examples).
run_as_unit() {
    local instance=$1
    shift
    install -d -o aerotp -g aerotp -m 0750 "/var/lib/aerotp/$instance"
    local rc=0
    timeout 2 runuser -u aerotp -- "$@" >"/tmp/aerotp-package-$instance.log" 2>&1 || rc=$?
    [ "$rc" -eq 124 ] || fail "$* exited $rc before 2 s: $(cat "/tmp/aerotp-package-$instance.log")"
    rm -f "/tmp/aerotp-package-$instance.log"
}
say "the units' command lines, as user aerotp"
recv_args=$(sed -n 's/^AEROTP_RECV_ARGS=//p' /etc/aerotp/recv.env)
# The key recv.env names, made as its comment says (recv refuses to start without one).
aerotp keygen /etc/aerotp/recv.key >/dev/null && chown aerotp:aerotp /etc/aerotp/recv.key
# shellcheck disable=SC2086 # split on whitespace, as systemd does with $AEROTP_RECV_ARGS
run_as_unit recv aerotp recv $recv_args
rm -f /etc/aerotp/recv.key
# The key both gateway configs name, made as their comment says (they refuse to start
# without one).
aerotp keygen /etc/aerotp/gw.key >/dev/null && chown aerotp:aerotp /etc/aerotp/gw.key
run_as_unit egress aerotp gw egress --config /etc/aerotp/egress.toml --listen 127.0.0.1:0 --metrics 127.0.0.1:0
run_as_unit ingress aerotp gw ingress --config /etc/aerotp/ingress.toml --peer 127.0.0.1:9 --metrics 127.0.0.1:0
rm -f /etc/aerotp/gw.key

say "dpkg -r (configuration, state and user stay)"
dpkg -r aerotp
[ ! -e /usr/bin/aerotp ] || fail "dpkg -r left /usr/bin/aerotp"
[ -f /etc/aerotp/ingress.toml ] || fail "dpkg -r removed a conffile"
getent passwd aerotp >/dev/null || fail "dpkg -r removed the user"

say "dpkg --purge (everything goes)"
dpkg --purge aerotp
trap - EXIT
while read -r f; do
    [ ! -e "$f" ] || fail "purge left $f"
done <<<"$installed_files"
for d in /etc/aerotp /var/lib/aerotp; do
    [ ! -e "$d" ] || fail "purge left $d"
done
! getent passwd aerotp >/dev/null || fail "purge left the user aerotp"
! getent group aerotp >/dev/null || fail "purge left the group aerotp"
! dpkg-query -W aerotp >/dev/null 2>&1 || fail "dpkg still knows the package"
say "passed: $(basename "$deb") built, installed, run, verified and purged"
