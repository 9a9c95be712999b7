#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run one command as root in a Soft-RoCE (rxe0) qemu VM that sees the host's files; exit with its status.
#
# Usage: run.sh [options] [--] command [args...]
#
# Options:
#   --timeout SECONDS  kill the VM after this long (boot included) and exit
#                      124 (default $ZV_VM_TIMEOUT or 600)
#   --cpus N           guest vCPUs, 1 or 2 (default $ZV_VM_CPUS or 1; 1 is
#                      fastest on a 2-core host unless the command needs two)
#   --mem SIZE         guest memory, qemu syntax (default $ZV_VM_MEM or 2G)
#   --share DIR        export DIR read-write at the same path in the guest;
#                      repeatable. Default: the git work tree holding the
#                      current directory, else the current directory.
#   --no-share         export nothing read-write (all writes stay in the VM)
#   -e, --env N=V      set a variable for the command; repeatable. UCX_*,
#                      OMPI_*, PMIX_*, GTEST_*, ZV_* (not ZV_VM_*), CI and
#                      LD_LIBRARY_PATH pass through from the caller as they are.
#   --force-vm         use the VM even when this host has an active RDMA port
#   --hostname NAME    the guest's hostname (default zverbs-vm)
#   --ip ADDR          eth0's IPv4 address, prefix /24 (default 10.0.2.15)
#   --mac MAC          eth0's MAC address (default 52:54:00:7a:76:01)
#   --nics N           1, or 2: a second NIC, eth1 = 10.0.3.15/24 on qemu's
#                      user network, with rxe1 on it (two rails in one
#                      guest; the default is $ZV_VM_NICS or 1)
#   --numa N           1, or 2: two NUMA nodes (needs --cpus 2: CPU 0 and
#                      half the memory on node 0, CPU 1 and the other half
#                      on node 1, SLIT distance 21), with eth0 on a PCI
#                      bus of node 0 and eth1 on one of node 1: a two-
#                      socket node with a NIC per socket ($ZV_VM_NUMA or 1)
#   --wire listen:PATH | connect:PATH
#                      join eth0 to a virtual wire instead of qemu's user
#                      network: a unix stream socket PATH that this qemu
#                      creates (listen) or connects to (connect); qemu's
#                      -netdev stream, lossless. run2.sh uses it.
#   -v, --verbose      show the kernel's and init's messages on stderr, and
#                      the boot time (also ZV_VM_VERBOSE=1)
#   -h, --help         this text
#
# The guest sees the host's / read-only under a tmpfs overlay (so it can
# write anywhere; writes outside the shared directories are lost), has
# eth0 = 10.0.2.15/24 (--ip) with rxe0 on it, hostname zverbs-vm
# (--hostname), and runs the command in the caller's current directory with
# stdin from /dev/null, HOME=/root and ulimit -l unlimited. The command's stdout and stderr come
# to run.sh's stdout and stderr.
#
# When this host has an RDMA device with an active port (ibv_devinfo shows
# PORT_ACTIVE), the command runs here directly, under the same timeout.
#
# Exit status: the command's; 124 on timeout; 125 when the VM could not be
# set up (the console's last lines are printed).
#
# Environment: ZV_VM_CACHE (kernel and initramfs cache, see fetch-kernel.sh),
# ZV_VM_QEMU (qemu binary), ZV_VM_MACHINE (qemu machine, default q35),
# ZV_VM_QEMU_ARGS (extra qemu arguments), ZV_VM_APPEND (extra kernel
# command line), ZV_VM_KEEP=1 (keep the per-run directory with the console log).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
vm_name=zverbs-vm
. "$here/vm-lib.sh"

timeout=${ZV_VM_TIMEOUT:-600}
cpus=${ZV_VM_CPUS:-1}
mem=${ZV_VM_MEM:-2G}
verbose=${ZV_VM_VERBOSE:-0}
force_vm=${ZV_VM_FORCE:-0}
hostname=zverbs-vm
ip=10.0.2.15
mac=52:54:00:7a:76:01
wire=
nics=${ZV_VM_NICS:-1}
numa=${ZV_VM_NUMA:-1}

# The options only run.sh takes (vm-lib.sh's vm_parse hands them here).
vm_option() {
    case "$1" in
        --force-vm)                force_vm=1; vm_took=1 ;;
        --hostname|--hostname=*)   vm_value "a name" "$@"; hostname=$vm_val ;;
        --ip|--ip=*)               vm_value "an address" "$@"; ip=$vm_val ;;
        --mac|--mac=*)             vm_value "an address" "$@"; mac=$vm_val ;;
        --wire|--wire=*)           vm_value "listen:PATH or connect:PATH" "$@"; wire=$vm_val ;;
        --nics|--nics=*)           vm_value "a value" "$@"; nics=$vm_val ;;
        --numa|--numa=*)           vm_value "a value" "$@"; numa=$vm_val ;;
    esac
}
vm_parse "$@"
set -- "${vm_args[@]}"
case "$nics" in 1|2) ;; *) die "--nics wants 1 or 2, not '$nics'" ;; esac
case "$numa" in 1|2) ;; *) die "--numa wants 1 or 2, not '$numa'" ;; esac
[ "$numa" = 1 ] || [ "$cpus" = 2 ] || die "--numa 2 needs --cpus 2 (one CPU per node)"
case "$hostname" in ''|-*|*[!A-Za-z0-9-]*) die "--hostname wants letters, digits and '-', not '$hostname'" ;; esac
echo "$ip" | grep -qE '^([0-9]{1,3}\.){3}[0-9]{1,3}$' || die "--ip wants an IPv4 address, not '$ip'"
echo "$mac" | grep -qiE '^([0-9a-f]{2}:){5}[0-9a-f]{2}$' || die "--mac wants xx:xx:xx:xx:xx:xx, not '$mac'"
# shellcheck disable=SC2054  # commas separate qemu sub-options
case "$wire" in
    '') netdev=(-netdev user,id=net0,restrict=on,ipv6=off) ;;
    listen:?*|connect:?*)
        path=${wire#*:}
        case "$path" in *,*) die "--wire: no commas in the socket path '$path'" ;; esac
        [ "${wire%%:*}" = listen ] && server=on || server=off
        netdev=(-netdev "stream,id=net0,server=$server,addr.type=unix,addr.path=$path") ;;
    *) die "--wire wants listen:PATH or connect:PATH, not '$wire'" ;;
esac
# With --numa 2, NIC n sits behind a PCIe expander bus of NUMA node n (the
# guest's kernel reads the node from ACPI, as on a real two-socket node).
# The expanders and the NICs on them go last: qemu puts a device given no
# bus on the newest one, and an expander takes only bridges.
numa_args=() pxb_args=() nic_at=("" "")
if [ "$numa" = 2 ]; then
    case "$mem" in
        *[Gg]) mib=$(( ${mem%[Gg]} * 1024 )) ;;
        *[Mm]) mib=${mem%[Mm]} ;;
        *[!0-9]*|'') die "--numa 2 wants --mem in M or G, not '$mem'" ;;
        *) mib=$mem ;;
    esac
    case "$mib" in ''|*[!0-9]*) die "--numa 2 wants --mem in whole M or G, not '$mem'" ;; esac
    for n in 0 1; do
        numa_args+=(-object "memory-backend-ram,id=zvmem$n,size=$(( mib / 2 ))M"
                    -numa "node,nodeid=$n,cpus=$n,memdev=zvmem$n")
        pxb_args+=(-device "pxb-pcie,id=zvpxb$n,bus_nr=$(( 32 * (n + 1) )),numa_node=$n,bus=pcie.0"
                   -device "pcie-root-port,id=zvrp$n,bus=zvpxb$n,chassis=$(( n + 1 )),slot=0")
        nic_at[n]=",bus=zvrp$n"
    done
    # shellcheck disable=SC2054  # commas separate qemu sub-options
    numa_args+=(-numa dist,src=0,dst=1,val=21)
fi
nic2=() mac2=
if [ "$nics" = 2 ]; then
    # eth1: its own user network (its own subnet), MAC eth0's + 1.
    mac2=$(printf '%s:%02x' "${mac%:*}" $(( (0x${mac##*:} + 1) & 255 )))
    # shellcheck disable=SC2054  # commas separate qemu sub-options
    nic2=(-netdev user,id=net1,restrict=on,ipv6=off,net=10.0.3.0/24)
    nic2+=(-device "virtio-net-@BUS@,netdev=net1,mac=$mac2,event_idx=off${nic_at[1]}")
fi

timed_out() { echo "zverbs-vm: command timed out after $timeout s" >&2; exit 124; }

# --- a host with a working RDMA port needs no VM ----------------------------
if [ "$force_vm" != 1 ] && command -v ibv_devinfo >/dev/null 2>&1 &&
   ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
    [ "$verbose" != 1 ] || echo "zverbs-vm: this host has an active RDMA port; running without a VM" >&2
    rc=0
    env ${envs[@]+"${envs[@]}"} timeout --kill-after=10 "$timeout" "$@" || rc=$?
    [ "$rc" != 124 ] || timed_out
    exit "$rc"
fi

# --- kernel and initramfs (cached) --------------------------------------------
qemu=${ZV_VM_QEMU:-qemu-system-x86_64}
command -v "$qemu" >/dev/null 2>&1 || die "$qemu not found: apt-get install qemu-system-x86"
kdir=$("$here/fetch-kernel.sh") || die "could not get the VM kernel (see above)"
initrd=$("$here/build-initrd.sh" "$kdir") || die "could not build the VM initramfs (see above)"

# --- the per-run directory -------------------------------------------------------
run=$(mktemp -d "${TMPDIR:-/tmp}/zverbs-vm.XXXXXX")
qpid='' spid='' tpid='' opid='' epid=''
cleanup() {
    local p
    for p in $qpid; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
            kill -KILL "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    for p in $spid $tpid $opid $epid; do kill "$p" 2>/dev/null || true; done
    if [ "${ZV_VM_KEEP:-0}" = 1 ]; then echo "zverbs-vm: kept $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }   # single-quote for sh

# Directories exported read-write.
if [ "$no_share" = 1 ]; then
    shares=()
elif [ ${#shares[@]} = 0 ]; then
    top=$(git rev-parse --show-toplevel 2>/dev/null || true)
    shares=("${top:-$PWD}")
fi
: >"$run/shares"
i=0
share_args=()
# q35: virtio-pci with MSI-X probes fast, and HPET/ACPI PM timers keep TSC
# calibration reliable on a busy host. microvm boots ~1 s faster but has no
# such timer, and its PIT-only calibration can fail under load (the guest
# then hangs): opt in with ZV_VM_MACHINE=microvm (an idle host helps).
machine=${ZV_VM_MACHINE:-q35}
case "$machine" in
    microvm) machine=microvm,pit=on,pic=on,rtc=on; bus=device ;;
    microvm,*) bus=device ;;
    *) bus=pci ;;
esac
case "$numa:$machine" in 1:*|2:q35*) ;; *) die "--numa 2 needs the q35 machine (PCIe expander buses), not '$machine'" ;; esac
for d in ${shares[@]+"${shares[@]}"}; do
    [ -d "$d" ] || die "--share '$d' is not a directory"
    d=$(cd "$d" && pwd -P)
    [ "$d" != / ] || die "refusing to share / read-write"
    case "$d" in *$'\n'*|*$'\t'*) die "cannot share '$d' (newline or tab in the path)" ;; esac
    printf 'zvs%d %s\n' "$i" "$d" >>"$run/shares"
    share_args+=(-fsdev "local,id=zvs$i,path=${d//,/,,},security_model=none,multidevs=remap"
                 -device "virtio-9p-$bus,fsdev=zvs$i,mount_tag=zvs$i")
    i=$((i + 1))
done

# Parents before children, so a nested share is mounted over its parent.
awk '{ p = $0; sub(/^[^ ]* /, "", p); print length(p) " " $0 }' "$run/shares" |
    sort -n -k1,1 | cut -d' ' -f2- >"$run/shares.sorted"
mv "$run/shares.sorted" "$run/shares"

cat >"$run/vm.conf" <<EOF
ZV_HOSTNAME=$hostname
ZV_IP=$ip
ZV_NICS=$nics
ZV_MACS="$mac${mac2:+ $mac2}"
EOF

{
    echo "# generated by run.sh"
    echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "export HOME=/root USER=root LOGNAME=root SHELL=/bin/sh LANG=C.UTF-8 TERM=dumb"
    echo "export ZV_VM=1"
    for n in $(compgen -e); do
        case "$n" in
            ZV_VM_*) ;;
            UCX_*|OMPI_*|PMIX_*|GTEST_*|ZV_*|CI|LD_LIBRARY_PATH) echo "export $n=$(sq "${!n}")" ;;
        esac
    done
    for e in ${envs[@]+"${envs[@]}"}; do echo "export ${e%%=*}=$(sq "${e#*=}")"; done
    echo "ulimit -l unlimited"
    echo "cd $(sq "$PWD") || { echo \"zverbs-vm: cannot enter $(sq "$PWD") in the VM\" >&2; exit 125; }"
    printf 'exec'
    for a in "$@"; do printf ' %s' "$(sq "$a")"; done
    echo
} >"$run/cmd"

# --- qemu ---------------------------------------------------------------------------
append="console=ttyS0 panic=-1 mitigations=off random.trust_cpu=on 8250.nr_uarts=1"
append+=" i8042.noaux i8042.nokbd i8042.nopnp"
if [ "$verbose" = 1 ]; then append+=" zv.verbose=1"; else append+=" quiet loglevel=3"; fi
append+=${ZV_VM_APPEND:+ $ZV_VM_APPEND}

mkfifo "$run/stdout" "$run/stderr"
cat <"$run/stdout" & opid=$!
cat <"$run/stderr" >&2 & epid=$!
# Hold the fifos open for writing ourselves: the readers then see EOF only
# after qemu *and* we have closed them, even if qemu never opens them.
exec 7>"$run/stdout" 8>"$run/stderr"

# shellcheck disable=SC2054  # commas separate qemu sub-options, not elements
qemu_args=(
    -name "$hostname" -machine "$machine,accel=tcg" -cpu max -smp "$cpus" -m "$mem"
    ${numa_args[@]+"${numa_args[@]}"}
    -nodefaults -no-user-config -display none -no-reboot -monitor none
    -kernel "$kdir/boot-image" -initrd "$initrd" -append "$append"
    -chardev "file,id=zvcon,path=${run//,/,,}/console.log" -serial chardev:zvcon
    -fsdev "local,id=zvroot,path=/,security_model=none,readonly=on,multidevs=remap"
    -device "virtio-9p-$bus,fsdev=zvroot,mount_tag=zvroot"
    -fsdev "local,id=zvrun,path=${run//,/,,},security_model=none"
    -device "virtio-9p-$bus,fsdev=zvrun,mount_tag=zvrun"
    ${share_args[@]+"${share_args[@]}"}
    "${netdev[@]}"
    -device "virtio-serial-$bus,id=vser"
    -chardev "file,id=zvout,path=${run//,/,,}/stdout"
    -device virtserialport,bus=vser.0,nr=1,chardev=zvout,name=zv.stdout
    -chardev "file,id=zverr,path=${run//,/,,}/stderr"
    -device virtserialport,bus=vser.0,nr=2,chardev=zverr,name=zv.stderr
    -device "virtio-rng-$bus"
    # The NICs last, after their expander buses (--numa 2; see above).
    # event_idx=off: the guest kicks on every buffer. With event index,
    # qemu 7.2's virtio-net can wait for a kick that never comes under load
    # (fixed upstream in 2024, "virtio-net: fix network stall under load"
    # and its follow-up); on the two-VM wire a receiver's NIC went deaf
    # for good, twice in ~17 lossy ud_zv runs, with its kernel quiet.
    ${pxb_args[@]+"${pxb_args[@]}"}
    -device "virtio-net-$bus,netdev=net0,mac=$mac,event_idx=off${nic_at[0]}"
    ${nic2[@]+"${nic2[@]//@BUS@/$bus}"}
)
# shellcheck disable=SC2206  # ZV_VM_QEMU_ARGS is split on purpose
extra=(${ZV_VM_QEMU_ARGS:-})

# If run.sh is SIGKILLed, take qemu with it.
pdeath=()
if setpriv --help 2>/dev/null | grep -q pdeathsig; then pdeath=(setpriv --pdeathsig KILL --); fi

: >"$run/console.log"
if [ "$verbose" = 1 ]; then tail -n +1 -f "$run/console.log" >&2 7>&- 8>&- & tpid=$!; fi
t0=$(now)
${pdeath[@]+"${pdeath[@]}"} "$qemu" "${qemu_args[@]}" ${extra[@]+"${extra[@]}"} \
    </dev/null >"$run/qemu.log" 2>&1 7>&- 8>&- &
qpid=$!

# Wait for qemu or the deadline. A sleep someone else kills early only
# makes us sleep again for what is left.
deadline=$((SECONDS + timeout))
while kill -0 "$qpid" 2>/dev/null; do
    left=$((deadline - SECONDS))
    # Timed out: cleanup (on exit) kills qemu and everything else we started.
    [ "$left" -gt 0 ] || timed_out
    sleep "$left" 7>&- 8>&- & spid=$!
    if [ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -ge 51 ]; then
        wait -n "$qpid" "$spid" || true
    else
        while kill -0 "$qpid" 2>/dev/null && kill -0 "$spid" 2>/dev/null; do sleep 0.2; done
    fi
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    spid=
done
t1=$(now)
qrc=0
wait "$qpid" || qrc=$?
qpid=
exec 7>&- 8>&-
wait "$opid" "$epid" 2>/dev/null || true; opid='' epid=''
if [ -n "$tpid" ]; then sleep 0.2; kill "$tpid" 2>/dev/null || true; wait "$tpid" 2>/dev/null || true; tpid=; fi

if [ "$verbose" = 1 ] && [ -f "$run/started" ]; then
    tb=$(stat -c %.9Y "$run/started")
    echo "zverbs-vm: boot $(elapsed "$t0" "$tb") s (qemu start to command start), command $(elapsed "$tb" "$t1") s, total $(elapsed "$t0" "$t1") s" >&2
fi

status=$(cat "$run/status" 2>/dev/null || true)
if [ -z "$status" ] || { [ "$status" = 125 ] && grep -q 'zverbs-vm init: error' "$run/console.log"; }; then
    echo "zverbs-vm: the VM did not run the command (qemu exit $qrc); its last messages:" >&2
    tail -n 25 "$run/qemu.log" "$run/console.log" >&2 || true
    exit 125
fi
exit "$status"
