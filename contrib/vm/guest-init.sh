#!/bin/busybox sh
# shellcheck shell=dash
# SPDX-License-Identifier: BSD-3-Clause
# /init of the zverbs VM initramfs: host root over 9p + tmpfs overlay, Soft-RoCE rxe0, run one command, power off.
#
# The host (run.sh) exports over virtio-9p:
#   zvroot  the host's /, read-only       -> lower layer of an overlay with a tmpfs upper
#   zvrun   a per-run directory, writable -> /run/zv: vm.conf, shares, cmd; we write
#           "started" (boot time is its host mtime) and "status" (the exit code)
#   zvsN    writable host directories     -> mounted at their host paths
# The command's stdout and stderr go to the virtio-serial ports named
# zv.stdout and zv.stderr; this script's own messages and the kernel's go to
# the serial console (ttyS0), which the host shows only when verbose.
# Exit status 125 in "status" means the VM itself could not be set up.
# Under set -e an unexpected failure ends init: the kernel panics, qemu
# exits (panic=-1, -no-reboot) and run.sh shows the console.
set -eu

export PATH=/bin
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/null >/dev/console 2>&1
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys

verbose=0
log() { if [ "$verbose" = 1 ]; then echo "zverbs-vm init [$(cut -d' ' -f1 /proc/uptime)]: $*"; fi; }
fail() {
    set +e
    echo "zverbs-vm init: error: $*"
    [ -d /zvrun ] && echo 125 >/zvrun/status 2>/dev/null
    sync
    reboot -f
    sleep 1000
}
# Run a program of the host root (iproute2's rdma, the command).
in_root() { PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot /newroot "$@"; }

if grep -q 'zv.verbose=1' /proc/cmdline; then verbose=1; fi
log "loading modules"
while read -r mod opt; do
    insmod "/lib/modules/$mod" 2>/tmp/insmod.err && continue
    [ "$opt" = optional ] || fail "insmod $mod: $(cat /tmp/insmod.err)"
done </lib/modules/modules.load

# msize: larger requests make 9p reads of binaries and libraries faster.
p9="trans=virtio,version=9p2000.L,msize=262144"
mkdir -p /zvrun /lower /rw /newroot
mount -t 9p -o "$p9" zvrun /zvrun || fail "cannot mount the run directory (9p tag zvrun)"
[ -f /zvrun/vm.conf ] || fail "no vm.conf in the run directory"
# shellcheck source=/dev/null
. /zvrun/vm.conf

log "mounting the host root"
mount -t 9p -o "$p9,ro,cache=loose" zvroot /lower || fail "cannot mount the host root (9p tag zvroot)"
mount -t tmpfs -o "mode=755,size=${ZV_OVERLAY_SIZE:-75%}" zvrw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
    fail "cannot mount the overlay root"

r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777 shm $r/dev/shm
mount -t tmpfs -o mode=1777 tmp $r/tmp
mount -t tmpfs -o mode=755 run $r/run
mkdir -p $r/run/zv $r/run/lock
mount -o bind /zvrun $r/run/zv

# Writable host directories, at the same paths as on the host.
# cache=mmap: writes reach the host at close/sync, shared mmap works.
while read -r tag path; do
    [ -n "$tag" ] || continue
    mkdir -p "$r$path" 2>/dev/null || true
    mount -t 9p -o "$p9,cache=mmap" "$tag" "$r$path" || fail "cannot mount share $tag at $path"
    log "shared $path (read-write)"
done </zvrun/shares

hostname "$ZV_HOSTNAME"
echo "$ZV_HOSTNAME" >$r/etc/hostname
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n' \
    "$ZV_IP" "$ZV_HOSTNAME" >$r/etc/hosts

log "network and rxe0"
ip link set lo up
# eth0, eth1: the NICs in run.sh's order, found by MAC address (the kernel
# names them in probe order, which PCIe expander buses (--numa 2) change).
i=0
for m in $ZV_MACS; do
    for n in /sys/class/net/*; do
        [ "$(cat "$n/address" 2>/dev/null)" = "$m" ] || continue
        ip link set "${n##*/}" name "zvnic$i" || fail "could not rename ${n##*/} (MAC $m)"
    done
    i=$((i + 1))
done
i=0
for m in $ZV_MACS; do
    ip link set "zvnic$i" name "eth$i" || fail "no NIC with MAC $m"
    i=$((i + 1))
done
# rxe_on NETDEV ADDR RXE: the address on the NIC, the rxe device on it, its
# port 1 active.
rxe_on() {
    ip addr add "$2/24" dev "$1" || fail "no $1 (virtio-net; a second one: run.sh --nics 2)"
    ip link set "$1" up
    in_root rdma link add "$3" type rxe netdev "$1" ||
        fail "'rdma link add $3 type rxe netdev $1' failed (is iproute2 installed on the host?)"
    local i=0
    until grep -q ACTIVE "/sys/class/infiniband/$3/ports/1/state" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "$3 port 1 did not become ACTIVE"
        sleep 0.1
    done
}
rxe_on eth0 "$ZV_IP" rxe0
# A second rail (run.sh --nics 2): eth1 on its own subnet, rxe1 on it.
[ "${ZV_NICS:-1}" != 2 ] || rxe_on eth1 10.0.3.15 rxe1

# The command's output channels (virtio-serial ports, found by name).
out='' err=''
for p in /sys/class/virtio-ports/*; do
    case "$(cat "$p/name" 2>/dev/null)" in
        zv.stdout) out=/dev/${p##*/} ;;
        zv.stderr) err=/dev/${p##*/} ;;
    esac
done
{ [ -n "$out" ] && [ -n "$err" ]; } || fail "virtio-serial ports zv.stdout/zv.stderr not found"

log "running the command"
cut -d' ' -f1 /proc/uptime >/zvrun/started
rc=0
in_root /bin/sh /run/zv/cmd >"$out" 2>"$err" || rc=$?
echo "$rc" >/zvrun/status
log "command exited with $(cat /zvrun/status)"
sync
reboot -f
sleep 1000
