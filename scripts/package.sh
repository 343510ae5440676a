#!/usr/bin/env bash
# Builds the Debian package of the field binary (docs/packaging.md):
#   target/debian/aerotp_VERSION_ARCH.deb
# with /usr/bin/aerotp (the field build, stripped: send, recv, gw, keygen, link), templated
# systemd units for `gw ingress`, `gw egress` and `recv`, configuration under /etc/aerotp/
# (conffiles), a system user `aerotp` owning /var/lib/aerotp (postinst; purged by postrm),
# man pages and bash/zsh/fish completions generated from the clap definitions.
# Needs dpkg-deb (dpkg), strip and objdump (binutils), gzip. Prints the .deb's path last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

for tool in cargo dpkg dpkg-deb strip objdump gzip; do
    command -v "$tool" >/dev/null || {
        echo "package.sh: $tool not found (apt-get install dpkg binutils gzip)" >&2
        exit 1
    }
done

target=${CARGO_TARGET_DIR:-$root/target}
out=$target/debian
stage=$out/stage
assets=$out/assets
rm -rf "$stage" "$assets"
mkdir -p "$out"

# Man pages and completions: from a build with the field build's features plus `assets`
# (a dev-profile build; the shipped binary does not carry the generators, crates/cli/src/assets_cmd.rs).
echo "package.sh: man pages and completions of the field commands"
# That build replaces target/debug/aerotp; the developer's own build (with `sim`, `lab`, ...)
# is put back afterwards, so `target/debug/aerotp sim` still works after packaging.
dev_bin=$target/debug/aerotp
kept=
if [ -f "$dev_bin" ]; then
    kept=$out/aerotp.debug.kept
    cp -p "$dev_bin" "$kept"
fi
AEROTP_GEN_ASSETS=$assets cargo run --locked -q -p aerotp --no-default-features --features assets >/dev/null
if [ -n "$kept" ]; then
    mv -f "$kept" "$dev_bin"
fi

echo "package.sh: field build (cargo build --release -p aerotp --no-default-features)"
cargo build --locked --release -p aerotp --no-default-features
install -D -m 0755 "$target/release/aerotp" "$stage/usr/bin/aerotp"
strip --strip-all "$stage/usr/bin/aerotp"
bin=$stage/usr/bin/aerotp
# The binary must be the field build (another build may have replaced target/release/aerotp).
if "$bin" sim --help >/dev/null 2>&1; then
    echo "package.sh: $target/release/aerotp has the development commands: not the field build" >&2
    exit 1
fi

version=$("$bin" --version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
deb=$out/aerotp_${version}_${arch}.deb

install -d -m 0755 "$stage/usr/lib/systemd/system"
install -m 0644 packaging/systemd/*.service "$stage/usr/lib/systemd/system/"
install -d -m 0755 "$stage/etc/aerotp"
install -m 0644 packaging/etc/* "$stage/etc/aerotp/"
install -d -m 0755 "$stage/usr/share/man/man1"
for page in "$assets"/man/*.1; do
    gzip -9n <"$page" >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
install -D -m 0644 "$assets/completions/aerotp.bash" "$stage/usr/share/bash-completion/completions/aerotp"
install -D -m 0644 "$assets/completions/_aerotp" "$stage/usr/share/zsh/vendor-completions/_aerotp"
install -D -m 0644 "$assets/completions/aerotp.fish" "$stage/usr/share/fish/vendor_completions.d/aerotp.fish"
install -d -m 0755 "$stage/usr/share/doc/aerotp"
cat >"$stage/usr/share/doc/aerotp/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: aerotp

Files: *
License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

# Depends: the shared libraries the binary links, the newest glibc symbol version it uses,
# and adduser for the postinst.
depends=adduser
for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
    case $lib in
    libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux*) ;;
    libgcc_s.so.1) depends="libgcc-s1, $depends" ;;
    *)
        echo "package.sh: the binary links $lib, which has no Depends entry here" >&2
        exit 1
        ;;
    esac
done
glibc=$(objdump -T "$bin" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -uV | tail -1)
depends="libc6 (>= $glibc), $depends"

install -d -m 0755 "$stage/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$stage/DEBIAN/"
(cd "$stage" && find etc -type f | sed 's|^|/|' | sort) >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/control" <<EOF
Package: aerotp
Version: $version
Architecture: $arch
Maintainer: AeroTP developers <aerotp@example.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Homepage: https://example.invalid/aerotp
Description: AeroTP transport for airborne telemetry (field build)
 The deployed commands of AeroTP: send and recv for files, gw for the AeroGW
 TCP/UDP gateways (ingress, egress), keygen for pre-shared keys and link for
 an emulated link. Built as $("$bin" --version).
 Templated systemd units: aerotp-gw-ingress@NAME and aerotp-gw-egress@NAME
 read /etc/aerotp/NAME.toml; aerotp-recv@NAME reads /etc/aerotp/NAME.env.
EOF

dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "package.sh: $(du -h "$deb" | cut -f1) $(basename "$deb"), $("$bin" --version), $(du -h "$bin" | cut -f1) stripped"
echo "$deb"
