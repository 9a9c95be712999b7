#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run one command on the first of two Soft-RoCE qemu VMs joined by a virtual wire (ssh and mpirun across); exit with its status.
#
# Usage: run2.sh [options] [--] command [args...]
#
# Options:
#   --timeout SECONDS  kill both VMs after this long (boots included) and
#                      exit 124 (default $ZV_VM_TIMEOUT or 600)
#   --cpus N           vCPUs of each VM, 1 or 2 (default 1: two VMs on a
#                      2-core host run fastest with one each)
#   --mem SIZE         memory of each VM, qemu syntax (default $ZV_VM_MEM or 2G)
#   --share DIR        export DIR read-write at the same path in both VMs;
#                      repeatable. Default: the git work tree holding the
#                      current directory, else the current directory.
#   --no-share         export nothing read-write
#   -e, --env N=V      set a variable for the command; repeatable (as run.sh)
#   -v, --verbose      kernel and init messages on stderr (zv-b's prefixed),
#                      boot times (also ZV_VM_VERBOSE=1)
#   -h, --help         this text
#
# Two VMs as run.sh boots them (1 vCPU each), zv-a 10.77.0.1 and zv-b
# 10.77.0.2 (/24, distinct MACs), rxe0 on each eth0, joined by qemu's
# -netdev stream over a unix socket (a lossless wire). In both: /etc/hosts
# names both, sshd runs with per-run host keys, root can ssh to the other
# without prompts (per-run client key and known_hosts, all in the VMs'
# tmpfs: nothing is written to this host's ~/.ssh), Open MPI's TCP
# keep-alives are short so mpirun notices a vanished VM, zv-wire is on PATH.
# The command runs on zv-a once zv-b answers ssh, with ZV_HOSTFILE (one slot
# per VM) and ZV_TWO_HOST=1 set:
#     mpirun --allow-run-as-root -np 2 --host zv-a,zv-b prog
# puts one rank in each VM. Faults: zv-wire (netem on either NIC, cut the
# wire, 'zv-wire kill b' makes this script kill zv-b's qemu at once).
# zv-b's own output goes to stderr only when it fails unexpectedly (or -v).
#
# Exit status: the command's; 124 on timeout; 125 when the VMs could not be
# set up. No qemu outlives this script (SIGTERM, SIGINT, SIGHUP included;
# on SIGKILL the run.sh children still take their VMs down).
#
# Environment: as run.sh (ZV_VM_CACHE, ZV_VM_QEMU, ZV_VM_MACHINE,
# ZV_VM_QEMU_ARGS, ZV_VM_APPEND, ZV_VM_KEEP=1 keeps the per-run directory).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
vm_name=zverbs-vm2
. "$here/vm-lib.sh"

timeout=${ZV_VM_TIMEOUT:-600}
cpus=1
mem=${ZV_VM_MEM:-2G}
verbose=${ZV_VM_VERBOSE:-0}
vm_parse "$@"
set -- "${vm_args[@]}"
command -v ssh-keygen >/dev/null 2>&1 || die "ssh-keygen not found: apt-get install openssh-client"
[ -x /usr/sbin/sshd ] || die "/usr/sbin/sshd not found: apt-get install openssh-server (contrib/setup.sh)"

# run.sh's default share, made explicit: the wire directory added below
# would otherwise replace it.
if [ "$no_share" = 1 ]; then
    shares=()
elif [ ${#shares[@]} = 0 ]; then
    top=$(git rev-parse --show-toplevel 2>/dev/null || true)
    shares=("${top:-$PWD}")
fi
share_opts=()
env_opts=()
for e in ${envs[@]+"${envs[@]}"}; do env_opts+=(-e "$e"); done
here_seen=0
for d in ${shares[@]+"${shares[@]}"}; do
    share_opts+=(--share "$d")
    case "$here/" in "${d%/}"/*) here_seen=1 ;; esac
done
# The VMs run two-host-guest.sh from here: share this directory too when
# no shared one holds it (a clone under /tmp is not visible in the VM).
[ $here_seen = 1 ] || share_opts+=(--share "$here")

t0=$(now)
deadline=$((SECONDS + timeout))     # counted from this script's start
timed_out() { echo "zverbs-vm: command timed out after $timeout s" >&2; exit 124; }
# Kernel and initramfs once, before the VMs race for the cache lock.
kdir=$("$here/fetch-kernel.sh") || die "could not get the VM kernel (see above)"
"$here/build-initrd.sh" "$kdir" >/dev/null || die "could not build the VM initramfs (see above)"

# --- the per-run directory -------------------------------------------------------
run=$(mktemp -d "${TMPDIR:-/tmp}/zverbs-vm2.XXXXXX")
g=$run/guest                 # shared read-write with both VMs
mkdir -p "$g/keys" "$g/ctl"
apid='' bpid='' lpid=''
# SIGTERM makes a run.sh take its qemu down (SIGKILL after 5 s); both at once.
cleanup() {
    local p left=''
    for p in $apid $bpid; do kill -TERM "$p" 2>/dev/null && left+=" $p"; done
    for _ in $(seq 1 60); do
        alive=0
        for p in $left; do ! kill -0 "$p" 2>/dev/null || alive=1; done
        [ $alive = 1 ] || break
        sleep 0.5
    done
    for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $apid $bpid; do wait "$p" 2>/dev/null || true; done
    [ -z "$lpid" ] || { kill "$lpid" 2>/dev/null || true; wait "$lpid" 2>/dev/null || true; }
    if [ "${ZV_VM_KEEP:-0}" = 1 ]; then echo "zverbs-vm2: kept $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

printf 'a zv-a 10.77.0.1\nb zv-b 10.77.0.2\n' >"$g/hosts"
for k in host_a host_b id; do
    ssh-keygen -q -t ed25519 -N '' -C "zverbs-vm2 $k" -f "$g/keys/$k" || die "ssh-keygen failed"
done
{
    echo "zv-a,10.77.0.1 $(cut -d' ' -f1,2 "$g/keys/host_a.pub")"
    echo "zv-b,10.77.0.2 $(cut -d' ' -f1,2 "$g/keys/host_b.pub")"
} >"$g/keys/known_hosts"
cp "$g/keys/id.pub" "$g/keys/authorized_keys"

# If this script is SIGKILLed, its run.sh children get SIGTERM (and then
# take their qemu down).
pdeath=()
if setpriv --help 2>/dev/null | grep -q pdeathsig; then pdeath=(setpriv --pdeathsig TERM --); fi
vopt=()
[ "$verbose" != 1 ] || vopt=(-v)
common=(--force-vm --timeout $((timeout + 60)) --cpus "$cpus" --mem "$mem"
        ${share_opts[@]+"${share_opts[@]}"} --share "$g" ${env_opts[@]+"${env_opts[@]}"}
        -e ZV_TWO_HOST_DIR="$g" ${vopt[@]+"${vopt[@]}"})

# --- VM a: creates the wire, runs the command ------------------------------------
${pdeath[@]+"${pdeath[@]}"} "$here/run.sh" "${common[@]}" --hostname zv-a --ip 10.77.0.1 \
    --mac 52:54:00:7a:76:0a --wire "listen:$run/wire" -- "$here/two-host-guest.sh" a -- "$@" &
apid=$!
until [ -S "$run/wire" ]; do
    if ! kill -0 "$apid" 2>/dev/null; then
        rc=0; wait "$apid" || rc=$?; apid=
        exit "$rc"
    fi
    [ $SECONDS -lt $deadline ] || timed_out
    sleep 0.1
done

# --- VM b: connects to the wire, serves ssh ---------------------------------------
: >"$run/b.log"
${pdeath[@]+"${pdeath[@]}"} "$here/run.sh" "${common[@]}" --hostname zv-b --ip 10.77.0.2 \
    --mac 52:54:00:7a:76:0b --wire "connect:$run/wire" -- "$here/two-host-guest.sh" b \
    >"$run/b.log" 2>&1 </dev/null &
bpid=$!
if [ "$verbose" = 1 ]; then
    tail -n +1 -f --pid="$bpid" "$run/b.log" | sed -u 's/^/zv-b: /' >&2 &
    lpid=$!
fi

# --- wait for a; serve requests from the guests -----------------------------------
b_killed=0 b_gone=0
while kill -0 "$apid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || timed_out
    for req in "$g"/ctl/req.*; do
        [ -f "$req" ] || continue
        id=${req##*/req.}
        what=$(cat "$req")
        rm -f "$req"
        case "$what" in
            "kill b")
                q=$(qemu_of "$bpid")
                [ -z "$q" ] || kill -KILL $q 2>/dev/null || true
                b_killed=1
                echo "zv-b killed (qemu ${q:-already gone}) at $(elapsed "$t0" "$(now)") s" >"$g/ctl/.ack.$id"
                [ "$verbose" != 1 ] || echo "zverbs-vm2: $(cat "$g/ctl/.ack.$id")" >&2 ;;
            *)  echo "unknown request '$what'" >"$g/ctl/.ack.$id" ;;
        esac
        mv "$g/ctl/.ack.$id" "$g/ctl/ack.$id"
    done
    if [ "$b_gone" = 0 ] && ! kill -0 "$bpid" 2>/dev/null; then
        b_gone=1
        if [ "$b_killed" = 0 ]; then
            if [ ! -f "$g/ready.b" ]; then
                echo "zverbs-vm2: VM zv-b did not come up:" >&2
                tail -n 30 "$run/b.log" >&2
                exit 125
            fi
            echo "zverbs-vm2: warning: VM zv-b went down unasked; its last messages:" >&2
            tail -n 15 "$run/b.log" >&2
        fi
    fi
    sleep 0.2
done
rc=0
wait "$apid" || rc=$?
apid=
if [ "$rc" = 125 ] && [ ! -f "$g/started" ] && [ "$b_gone" = 0 ] && [ -s "$run/b.log" ]; then
    echo "zverbs-vm2: zv-b's messages:" >&2
    tail -n 15 "$run/b.log" >&2
fi
if [ "$verbose" = 1 ]; then
    for f in ready.a ready.b started; do
        [ -f "$g/$f" ] && echo "zverbs-vm2: $f at $(elapsed "$t0" "$(stat -c %.9Y "$g/$f")") s" >&2
    done
    echo "zverbs-vm2: total $(elapsed "$t0" "$(now)") s" >&2
fi
exit "$rc"
