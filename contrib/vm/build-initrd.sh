#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the zverbs VM's busybox initramfs into the cache; rebuilt only when its inputs change.
#
# Usage: build-initrd.sh KERNEL_DIR
#   KERNEL_DIR is what fetch-kernel.sh printed. Prints the initramfs path.
#   Inputs: static busybox, guest-init.sh, the kernel's selected modules.
#   The archive is an uncompressed cpio: decompressing in the guest costs
#   more under emulation than loading a few more MiB.
#
# Environment: ZV_VM_CACHE (as fetch-kernel.sh), ZV_VM_BUSYBOX (static busybox,
# default: busybox on PATH, from Debian's busybox-static).
set -eu

die() { echo "zverbs-vm: $*" >&2; exit 1; }

kdir=${1:?usage: build-initrd.sh KERNEL_DIR}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$kdir/modules.load" ] || die "'$kdir' is not a kernel directory from fetch-kernel.sh"

if [ -z "${ZV_VM_CACHE:-}" ]; then
    if [ "$(id -u)" = 0 ]; then ZV_VM_CACHE=/var/cache/zverbs-vm
    else ZV_VM_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/zverbs-vm"; fi
fi

bb=${ZV_VM_BUSYBOX:-$(command -v busybox || true)}
{ [ -n "$bb" ] && [ -x "$bb" ]; } || die "busybox not found: apt-get install busybox-static"
bb=$(readlink -f "$bb")
# The initramfs has no libraries: busybox must be static.
if ldd "$bb" 2>/dev/null | grep -q '=>'; then
    die "$bb is dynamically linked: apt-get install busybox-static (or set ZV_VM_BUSYBOX)"
fi
command -v cpio >/dev/null 2>&1 || die "cpio not found: apt-get install cpio"

# Key: everything that goes into the archive.
mods=()
while read -r mod _; do mods+=("$kdir/modules/$mod"); done <"$kdir/modules.load"
key=$( {
    cat "$kdir/release"
    sha256sum "$bb" "$here/guest-init.sh" "$kdir/modules.load" "${mods[@]}" | cut -d' ' -f1
} | sha256sum | cut -c1-16)
out="$ZV_VM_CACHE/initrd/initrd-$key.cpio"
if [ -f "$out" ]; then echo "$out"; exit 0; fi

mkdir -p "$ZV_VM_CACHE/initrd"
tmp=$(mktemp -d "$ZV_VM_CACHE/initrd/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
mkdir -p "$root"/bin "$root"/dev "$root"/proc "$root"/sys "$root"/tmp "$root"/lib/modules
cp "$bb" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/guest-init.sh" "$root/init"
chmod 755 "$root/init" "$root/bin/busybox"
while read -r mod _; do
    mkdir -p "$root/lib/modules/$(dirname "$mod")"
    cp "$kdir/modules/$mod" "$root/lib/modules/$mod"
done <"$kdir/modules.load"
cp "$kdir/modules.load" "$root/lib/modules/modules.load"

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$tmp/initrd.cpio" ||
    die "cpio failed while building the initramfs"
mv "$tmp/initrd.cpio" "$out"
# Older archives are for inputs that changed.
find "$ZV_VM_CACHE/initrd" -maxdepth 1 -name 'initrd-*.cpio' ! -path "$out" -mmin +60 -delete 2>/dev/null || true
echo "$out"
