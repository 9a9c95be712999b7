#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The UCT device tests (test/device/zv_device) on the first verbs device,
# with what they need of the host: run by device-tests.sh (the device
# tier) and by contrib/test.sh --quick (the quick tier), in the VM.
#
# usage: ZV_BUILDDIR=B uct-tests.sh OUTPUT [gtest arguments]
# Writes zv_device's whole output to OUTPUT; exits non-zero if a shard failed.
#
# The spoofing test sends from a second IPv4 GID of the port (RoCE v2
# cannot mix an IPv6 source with an IPv4 destination): an address of
# TEST-NET-1 on the port's netdev gives rxe one (only in the zverbs VM: on
# a real host, give the port a second IPv4 address yourself, or that test
# is skipped).
set -u
b=${ZV_BUILDDIR:?}
out=${1:?usage: uct-tests.sh OUTPUT [gtest arguments]}
shift
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
ndev=$(cat /sys/class/infiniband/"$dev"/ports/1/gid_attrs/ndevs/0 2>/dev/null)
if [ -e /run/zv/vm.conf ] && [ -n "$ndev" ] && ! ip -4 addr show dev "$ndev" | grep -q 192.0.2.77; then
    ip addr add 192.0.2.77/32 dev "$ndev" && sleep 1
fi
# In ZV_UCT_SHARDS processes at once (default 2, gtest's sharding: every
# test runs in exactly one): many tests wait on their peers' timers, and two
# shards took 112 s where one process took 159 s (in the VM, 2 vCPUs). Each
# shard's output follows the other's in OUTPUT, each with its own summary.
shards=${ZV_UCT_SHARDS:-2}
pids=()
for i in $(seq 0 $((shards - 1))); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i ZV_REQUIRE_DEVICE=1 \
        timeout -k 10 1500 "$b/test/device/zv_device" "$@" > "$out.$i" 2>&1 &
    pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || rc=$?
done
for i in "${!pids[@]}"; do
    cat "$out.$i"
    rm -f "$out.$i"
done > "$out"
exit $rc
