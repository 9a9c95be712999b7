#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetch Debian's 6.1 kernel and the modules the Soft-RoCE VM needs into a cache, without installing it.
#
# Usage: fetch-kernel.sh [--refresh]
#   Prints the kernel directory on stdout (messages go to stderr). Does
#   nothing when a kernel is already cached, unless --refresh is given (then
#   it fetches the newest available one if it is newer).
#
# The kernel directory holds:
#   vmlinuz        the package's compressed kernel
#   vmlinux        the uncompressed ELF image, only when it has a PVH entry
#                  (qemu boots it directly, skipping decompression)
#   boot-image     the file to give qemu -kernel (vmlinux or vmlinuz)
#   config         the kernel's build configuration
#   modules/       the selected modules, under their lib/modules/<rel>/ paths
#   modules.load   load order (dependencies first), one path per line,
#                  relative to modules/; lines ending in " optional" may fail
#   release        the kernel release string (uname -r of the guest)
#
# Environment:
#   ZV_VM_CACHE        cache directory (default /var/cache/zverbs-vm as root,
#                      ~/.cache/zverbs-vm otherwise)
#   ZV_VM_KERNEL_PKG   force a kernel package name (e.g. linux-image-6.1.0-57-amd64-unsigned)
#   ZV_VM_KERNEL_DEB   use this local .deb instead of downloading (offline machines)
#   ZV_VM_MODULES      extra modules to include (space separated), with their dependencies
set -eu

die() { echo "zverbs-vm: $*" >&2; exit 1; }
msg() { echo "zverbs-vm: $*" >&2; }

refresh=0
case "${1:-}" in
    --refresh) refresh=1 ;;
    "") ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "fetch-kernel.sh: unknown option '$1' (try --help)" ;;
esac

if [ -z "${ZV_VM_CACHE:-}" ]; then
    if [ "$(id -u)" = 0 ]; then ZV_VM_CACHE=/var/cache/zverbs-vm
    else ZV_VM_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/zverbs-vm"; fi
fi
cache=$ZV_VM_CACHE
mkdir -p "$cache/kernel" || die "cannot create cache directory '$cache' (set ZV_VM_CACHE to a writable directory)"

for tool in dpkg-deb depmod xz flock; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "'$tool' not found: apt-get install dpkg kmod xz-utils util-linux"
done

# Modules the guest loads. Dependencies come from modules.dep; what the
# kernel has built in (=y) is simply skipped.
#   rdma_rxe, ib_uverbs, rdma_ucm   Soft-RoCE, /dev/infiniband/uverbs*, rdmacm
#   crc32_generic                   rxe's ICRC asks the crypto API for "crc32"
#   virtio_mmio virtio_pci          virtio transports (microvm, pc)
#   virtio_net                      the NIC rxe sits on
#   virtio_console                  virtio-serial ports carrying stdout/stderr
#   9pnet_virtio 9p overlay         host root over 9p with a tmpfs overlay
#   virtio_rng                      entropy early in boot
#   sch_netem                       faults on the two-host wire (run2.sh, zv-wire)
required_modules="virtio_mmio virtio_pci virtio_net virtio_console 9pnet_virtio 9p overlay
                  crc32_generic ib_uverbs rdma_ucm rdma_rxe virtio_rng sch_netem ${ZV_VM_MODULES:-}"
# Loaded when present; failing to load them is not an error (e.g. no PCLMUL).
optional_modules="crc32-pclmul"

exec 9>"$cache/.lock"
flock 9 || die "cannot lock '$cache/.lock'"

current="$cache/kernel/current"
required_modules=$(echo $required_modules)   # one line, single spaces
want="$required_modules | $optional_modules"
cached_deb=
if [ "$refresh" = 0 ] && [ -f "$current/stamp" ]; then
    if [ "$(cat "$current/modules.want" 2>/dev/null)" = "$want" ]; then
        (cd "$current" && pwd -P)
        exit 0
    fi
    # The module list changed: select again from the package we have.
    cached_deb=$(ls "$cache/debs/$(cat "$current/package")"_*.deb 2>/dev/null | head -n1 || true)
fi

# --- choose the package -----------------------------------------------------
# Newest ABI first; for one ABI the -unsigned package (same kernel and
# modules as the signed one, without the Secure Boot signature) first.
candidates() {
    if [ -n "${ZV_VM_KERNEL_PKG:-}" ]; then echo "$ZV_VM_KERNEL_PKG"; return; fi
    command -v apt-cache >/dev/null 2>&1 || return 0
    apt-cache pkgnames linux-image-6.1.0- 2>/dev/null |
        grep -E '^linux-image-6\.1\.0-[0-9]+-amd64(-unsigned)?$' |
        sed -E 's/^linux-image-6\.1\.0-([0-9]+)-amd64(-unsigned)?$/\1 \2 &/' |
        sort -k1,1nr -k2,2r | awk '{print $NF}'
}

work=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Let apt's unprivileged _apt user write there (else apt warns, and works).
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$work"; fi

deb=
if [ -n "$cached_deb" ]; then
    deb=$cached_deb
elif [ -n "${ZV_VM_KERNEL_DEB:-}" ]; then
    [ -f "$ZV_VM_KERNEL_DEB" ] || die "ZV_VM_KERNEL_DEB='$ZV_VM_KERNEL_DEB' is not a file"
    deb=$ZV_VM_KERNEL_DEB
else
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; set ZV_VM_KERNEL_DEB to a linux-image-6.1.0-*-amd64 .deb"
    pkgs=$(candidates)
    [ -n "$pkgs" ] || die "no linux-image-6.1.0-*-amd64 package known to apt.
  Fix: run 'apt-get update' (Debian 12 'bookworm' sources), or set
  ZV_VM_KERNEL_DEB=/path/to/linux-image-6.1.0-N-amd64-unsigned_*.deb"
    if [ "$refresh" = 1 ] && [ -f "$current/stamp" ]; then
        newest=$(echo "$pkgs" | head -n1)
        if [ "$(cat "$current/package" 2>/dev/null)" = "$newest" ]; then
            (cd "$current" && pwd -P); exit 0
        fi
    fi
    for pkg in $pkgs; do
        msg "downloading $pkg (not installed on this host)"
        if (cd "$work" && apt-get download -q "$pkg" >&2); then
            deb=$(ls "$work"/*.deb 2>/dev/null | head -n1)
            [ -n "$deb" ] && break
        fi
        msg "could not download $pkg, trying the next candidate"
    done
    [ -n "$deb" ] || die "could not download any of: $(echo "$pkgs" | tr "\n" " " | head -c 300)
  Fix: check network access to the Debian archive and run 'apt-get update',
  or set ZV_VM_KERNEL_DEB to a downloaded linux-image-6.1.0-*-amd64 .deb"
fi
pkg=$(dpkg-deb -f "$deb" Package) || die "'$deb' is not a Debian package"
# Keep the package (~70 MB): a changed module list then needs no download.
mkdir -p "$cache/debs"
case "$deb" in
    "$cache/debs/"*) ;;
    *) find "$cache/debs" -maxdepth 1 -name '*.deb' -delete
       if [ "${deb#"$work"/}" != "$deb" ]; then mv "$deb" "$cache/debs/"; else cp "$deb" "$cache/debs/"; fi
       deb="$cache/debs/${deb##*/}" ;;
esac
msg "extracting $pkg"
dpkg-deb -x "$deb" "$work/root" || die "dpkg-deb -x failed on '$deb' (disk full?)"

vmlinuz=$(ls "$work"/root/boot/vmlinuz-* 2>/dev/null | head -n1)
[ -n "$vmlinuz" ] || die "$pkg has no /boot/vmlinuz-*"
krel=${vmlinuz##*/vmlinuz-}
moddir="$work/root/lib/modules/$krel"
[ -d "$moddir" ] || die "$pkg has no /lib/modules/$krel"

# The package has no modules.dep (the postinst makes it): build it here.
depmod -b "$work/root" "$krel" || die "depmod failed for $krel"

# --- resolve the module list from modules.dep ------------------------------
# Prints paths relative to lib/modules/<rel>, each after its dependencies.
resolve() {
    awk -v want="$1" -v optional="$2" -v builtin_file="$moddir/modules.builtin" '
        function norm(s) { sub(/.*\//, "", s); sub(/\.ko(\.[a-z]+)?$/, "", s); gsub(/-/, "_", s); return s }
        function visit(p,    n, i, d) {
            if (p in done) return
            done[p] = 1
            n = split(deps[p], d, " ")
            for (i = n; i >= 1; i--) visit(d[i])   # modprobe loads the list from its end
            print p (p in opt ? " optional" : "")
        }
        BEGIN { while ((getline l < builtin_file) > 0) builtin[norm(l)] = 1 }
        { p = $1; sub(/:$/, "", p); path[norm(p)] = p; $1 = ""; deps[p] = $0 }
        END {
            nw = split(want, w, " ")
            for (i = 1; i <= nw; i++) {
                m = w[i]; gsub(/-/, "_", m)
                if (m in path) visit(path[m])
                else if (!(m in builtin)) { print "missing " w[i] > "/dev/stderr"; bad = 1 }
            }
            no = split(optional, o, " ")
            for (i = 1; i <= no; i++) {
                m = o[i]; gsub(/-/, "_", m)
                if ((m in path) && !(path[m] in done)) { opt[path[m]] = 1; visit(path[m]) }
            }
            exit bad
        }' "$moddir/modules.dep"
}
resolve "$required_modules" "$optional_modules" >"$work/modules.load" ||
    die "$pkg lacks required modules (see 'missing' above)"

# --- assemble the kernel directory ------------------------------------------
out="$work/out"
mkdir -p "$out/modules"
cp "$vmlinuz" "$out/vmlinuz"
cp "$work/root/boot/config-$krel" "$out/config"
while read -r rel _; do
    mkdir -p "$out/modules/$(dirname "$rel")"
    cp "$moddir/$rel" "$out/modules/$rel"
done <"$work/modules.load"
cp "$work/modules.load" "$out/modules.load"
echo "$krel" >"$out/release"
echo "$want" >"$out/modules.want"
echo "$pkg" >"$out/package"
dpkg-deb -f "$deb" Version >"$out/version"

# vmlinux: booting the uncompressed ELF through its PVH entry saves the
# in-guest decompression (~4 s under TCG). Only with CONFIG_PVH=y.
boot=vmlinuz
if grep -q '^CONFIG_PVH=y' "$out/config"; then
    if "$(dirname "$0")/extract-vmlinux.sh" "$out/vmlinuz" >"$out/vmlinux.tmp"; then
        mv "$out/vmlinux.tmp" "$out/vmlinux"
        boot=vmlinux
    else
        rm -f "$out/vmlinux.tmp"
        msg "could not extract vmlinux; booting the compressed vmlinuz (slower)"
    fi
fi
ln -s "$boot" "$out/boot-image"
date -u +%Y-%m-%dT%H:%M:%SZ >"$out/stamp"

dest="$cache/kernel/$krel"
rm -rf "$dest"
mv "$out" "$dest"
ln -sfn "$krel" "$cache/kernel/current.tmp" && mv -T "$cache/kernel/current.tmp" "$current"
for old in "$cache"/kernel/*/; do       # drop kernels a --refresh replaced
    [ "$(basename "$old")" = "$krel" ] || [ "$(basename "$old")" = current ] || rm -rf "$old"
done
msg "kernel $krel ($pkg $(cat "$dest/version")) ready in $dest, booting $boot"
echo "$dest"
