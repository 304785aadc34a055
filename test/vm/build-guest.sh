#!/bin/sh
# Builds the rxe test guest: Debian's own kernel plus an initramfs holding static
# busybox and the RDMA modules. Everything else the guest runs comes from the host's
# root, shared read-write over 9p (see guest-init.sh).
#
#   build-guest.sh [--kernel PKG] OUT_DIR
#
# Writes OUT_DIR/kernel, OUT_DIR/initrd and OUT_DIR/kernel-version. Rebuilds only
# when the kernel package or one of this directory's scripts changed. The kernel
# package is downloaded once into $RDMA_ASIO_CACHE (default ~/.cache/rdma_asio) when
# that is writable, else into OUT_DIR.
#
# --kernel PKG: that kernel package (linux-image-VERSION-amd64) instead of the one
# linux-image-amd64 depends on, e.g. bookworm-backports' linux-image-6.12.95+deb12-amd64
# for a newer rxe. It is taken from bookworm-backports (backports-apt.sh: apt with a
# private state in the cache), else from this machine's apt sources. Give each kernel
# an OUT_DIR of its own (rdma-asio-vm does): one OUT_DIR holds one image.
set -eu

kernel_pkg=
if [ "${1:-}" = --kernel ]; then
    kernel_pkg=${2:?usage: build-guest.sh [--kernel PKG] OUT_DIR}
    shift 2
fi
out=${1:?usage: build-guest.sh [--kernel PKG] OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

die() { echo "build-guest: $*" >&2; exit 1; }

# One package, named exactly: apt-get download would take a pattern as well.
case "$kernel_pkg" in
'') ;;
*[!a-z0-9.+-]*) die "--kernel takes a package name, not '$kernel_pkg'" ;;
linux-image-[0-9]*-amd64) ;;
*) die "--kernel takes a kernel image package, linux-image-VERSION-amd64, not '$kernel_pkg'" ;;
esac

for tool in apt-cache apt-get dpkg-deb depmod modprobe cpio sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "missing '$tool' (install kmod, cpio, apt)"
done
[ -x /bin/busybox ] || die "missing /bin/busybox (install busybox-static)"
file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }
file_is_static /bin/busybox || die "/bin/busybox is dynamically linked (install busybox-static)"

# The kernel: whatever linux-image-amd64 depends on today, one package only. apt's
# answer depends only on its package lists and its configuration; it is kept beside
# the image with their listing, and asked again when one of them changed. Asking costs
# about a second where apt keeps no package cache (Debian's container images), and
# every start of the test VM comes through here.
apt_state=$( (ls -l --full-time /var/lib/apt/lists; ls -lR --full-time /etc/apt) 2>/dev/null |
    sha256sum | cut -c1-16)
kpkg=$kernel_pkg
if [ -z "$kpkg" ] && [ -f "$out/kernel-package" ]; then
    read -r known_state known_kpkg <"$out/kernel-package" || true
    [ "${known_state:-}" != "$apt_state" ] || kpkg=${known_kpkg:-}
fi
if [ -z "$kpkg" ]; then
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
    [ -n "$kpkg" ] || die "apt-cache cannot resolve linux-image-amd64 (run apt-get update)"
    echo "$apt_state $kpkg" >"$out/kernel-package"
fi
kver=${kpkg#linux-image-}

cache=${RDMA_ASIO_CACHE:-${HOME:-/nonexistent}/.cache/rdma_asio}
if ! mkdir -p "$cache/debs" 2>/dev/null || [ ! -w "$cache/debs" ]; then
    cache=$out/cache
    mkdir -p "$cache/debs"
fi

inputs_hash=$(cat "$here/build-guest.sh" "$here/guest-init.sh" "$here/modules.list" |
    sha256sum | cut -c1-16)
stamp="$kpkg $inputs_hash"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] &&
    [ -f "$out/kernel" ] && [ -f "$out/initrd" ]; then
    exit 0
fi

# A guest image built by another build tree with the same inputs.
cached_image=$cache/guest/$kver-$inputs_hash
if [ -f "$cached_image/kernel" ] && [ -f "$cached_image/initrd" ]; then
    cp "$cached_image/kernel" "$cached_image/initrd" "$out/"
    echo "$kver" >"$out/kernel-version"
    echo "$stamp" >"$out/stamp"
    echo "build-guest: reused cached guest image for $kver"
    exit 0
fi

cached_deb() { ls "$cache/debs/${kpkg}_"*_amd64.deb 2>/dev/null | head -n 1; }
# A named package from bookworm-backports, through the private state: its package
# lists as they are first, updated when they do not have it (or had an older
# version, gone from the mirror since).
download_from_backports() {
    . "$here/backports-apt.sh"
    backports_apt_init "$cache" || return 1
    (cd "$cache/debs" && backports_apt download "$kpkg" >/dev/null 2>&1) && return 0
    echo "build-guest: updating the package lists of bookworm-backports"
    backports_apt update >/dev/null && (cd "$cache/debs" && backports_apt download "$kpkg")
}
deb=$(cached_deb)
if [ -z "$deb" ] && [ -n "$kernel_pkg" ]; then
    echo "build-guest: downloading $kpkg from bookworm-backports"
    download_from_backports ||
        echo "build-guest: bookworm-backports has no $kpkg; trying this machine's apt sources"
    deb=$(cached_deb)
fi
if [ -z "$deb" ]; then
    echo "build-guest: downloading $kpkg"
    (cd "$cache/debs" && apt-get download -q "$kpkg" 2>&1 | grep -v unsandboxed) ||
        [ -n "$(cached_deb)" ] || die "apt-get download $kpkg failed"
    deb=$(cached_deb)
fi

work=$out/work
rm -rf "$work"
mkdir -p "$work/kernel" "$work/initramfs"
echo "build-guest: unpacking $(basename "$deb")"
dpkg-deb -x "$deb" "$work/kernel"
depmod -b "$work/kernel" "$kver"

moddir=lib/modules/$kver
modules=$(grep -v '^#' "$here/modules.list" | tr '\n' ' ')
root=$work/initramfs
mkdir -p "$root/bin" "$root/sbin" "$root/proc" "$root/sys" "$root/dev" \
    "$root/host" "$root/$moddir"
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount umount mkdir insmod poweroff cat echo sleep chroot; do
    ln -s busybox "$root/bin/$applet"
done
ln -s ../bin/busybox "$root/sbin/modprobe"
cp "$here/guest-init.sh" "$root/init"
chmod 755 "$root/init"

# Modules in dependency order; insmod in the guest follows this list.
: >"$root/modules.order"
for m in $modules; do
    modprobe -d "$work/kernel" -S "$kver" --show-depends "$m" |
        sed -n 's/^insmod \([^ ]*\).*/\1/p'
done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#"$work/kernel/"}
    mkdir -p "$root/$(dirname "$rel")"
    cp "$ko" "$root/$rel"
    echo "/$rel" >>"$root/modules.order"
done
cp "$work/kernel/$moddir"/modules.* "$root/$moddir/"
[ -s "$root/modules.order" ] || die "no modules resolved for: $modules"

# The initramfs uncompressed: the guest's emulated CPU took 0.2 s to unpack it gzipped.
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$out/initrd.tmp"

# The kernel uncompressed, as an ELF file qemu starts at its PVH entry point, when the
# kernel has one (CONFIG_PVH) and is compressed with xz (Debian 12's own kernels are):
# under emulation, unpacking the compressed kernel took about 4 of the 10 seconds
# from starting qemu to the job. Otherwise the compressed kernel, as it comes:
# bookworm-backports' 6.12 is compressed with zstd, and unpacked in advance it booted
# no faster (five boots each, 7 to 16 s either way on the shared 2-core machine).
bzimage=$work/kernel/boot/vmlinuz-$kver
xz_at=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$bzimage" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
if grep -qx 'CONFIG_PVH=y' "$work/kernel/boot/config-$kver" && [ -n "$xz_at" ] &&
    command -v xz >/dev/null 2>&1 &&
    tail -c +$((xz_at + 1)) "$bzimage" | xz -dc --single-stream >"$out/kernel.tmp" 2>/dev/null &&
    [ "$(head -c 4 "$out/kernel.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    kernel_form="uncompressed, PVH entry"
else
    cp "$bzimage" "$out/kernel.tmp"
    kernel_form="compressed"
fi
mv "$out/kernel.tmp" "$out/kernel"
mv "$out/initrd.tmp" "$out/initrd"
rm -f "$out/vmlinuz" "$out/initrd.gz" # what this script wrote before
echo "$kver" >"$out/kernel-version"
echo "$stamp" >"$out/stamp"
nmod=$(wc -l <"$root/modules.order")
rm -rf "$work"

if mkdir -p "$cached_image" 2>/dev/null; then
    cp "$out/kernel" "$out/initrd" "$cached_image/" 2>/dev/null || true
fi
echo "build-guest: guest for $kver ready in $out ($nmod modules, kernel $kernel_form)"
