#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Before and after a change: another build's module (OLD) beside this
# build's, interleaved in one run on one device, medians of the rounds and
# after/before per figure. UCT latency (am_lat 8 B over ud_zv and rc_zv,
# put_lat 8 B over uc_zv) and UCP tag bandwidth (the path Open MPI's pml ucx
# takes) at 4 KiB (eager) and 1 MiB (rendezvous) over each zv transport,
# with ud_verbs' am_lat as the reference: the same code in both columns, so
# its after/before is the noise of the run.
#
# Usage: contrib/bench/ab-bench.sh OLD_MODULE [BUILD_DIR]   (default: ./build)
#   e.g. git worktree add /tmp/old <commit>; ZV_BUILDDIR=/tmp/old/build
#   /tmp/old/contrib/build.sh; cp -L /tmp/old/build/.libs/libuct_zv.so.0
#   build/old.so; contrib/bench/ab-bench.sh build/old.so
# OLD_MODULE must be readable in the VM: a path under this tree or BUILD_DIR.
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
# Environment: ZV_BENCH_ROUNDS (default 3).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
if [ $# -lt 1 ] || [ ! -r "$1" ]; then
    echo "usage: $0 OLD_MODULE [BUILD_DIR]   (OLD_MODULE: a readable libuct_zv.so.0)" >&2
    exit 1
fi
old=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
b=$(cd "${2:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}

bench_in_vm -- "$old" "$b"

dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
declare -A mods=([old]=$old [new]=$b/.libs/libuct_zv.so.0)
pt() { local col=$1; shift; pt_pair "$tmp/cli" "$@"; pt_column "$col" "$tmp/cli"; }
declare -A r
for ((i = 1; i <= rounds; ++i)); do
    order="old new"; [ $((i % 2)) = 1 ] || order="new old"
    for v in $order; do
        mod=${mods[$v]}
        r[udlat_$v]+=" $(pt 3 -t am_lat -x ud_zv -d "$dev:1" -s 8 -n 2000)"
        r[uclat_$v]+=" $(pt 3 -t put_lat -x uc_zv -d "$dev:1" -s 8 -n 2000)"
        r[rclat_$v]+=" $(pt 3 -t am_lat -x rc_zv -d "$dev:1" -s 8 -n 2000)"
        for tl in ud uc rc; do
            r[${tl}bw_$v]+=" $(UCX_TLS=${tl}_zv,self pt 7 -t tag_bw -s 1048576 -n 30)"
            r[${tl}bw4_$v]+=" $(UCX_TLS=${tl}_zv,self pt 7 -t tag_bw -s 4096 -n 4000)"
        done
        r[vlat_$v]+=" $(pt 3 -t am_lat -x ud_verbs -d "$dev:1" -s 8 -n 2000)"
    done
done
echo "== before ($old) and after ($b), $rounds rounds, medians"
printf '%-36s %10s %10s %8s   %s\n' measure before after after/before "rounds (before | after)"
for k in udlat:"ud_zv am_lat 8 B us" uclat:"uc_zv put_lat 8 B us" rclat:"rc_zv am_lat 8 B us" \
         udbw:"ud_zv tag_bw 1 MiB MB/s" ucbw:"uc_zv tag_bw 1 MiB MB/s" rcbw:"rc_zv tag_bw 1 MiB MB/s" \
         udbw4:"ud_zv tag_bw 4 KiB MB/s" ucbw4:"uc_zv tag_bw 4 KiB MB/s" rcbw4:"rc_zv tag_bw 4 KiB MB/s" \
         vlat:"ud_verbs am_lat 8 B us (reference)"; do
    key=${k%%:*}; name=${k#*:}
    o=$(echo "${r[${key}_old]}" | median); n=$(echo "${r[${key}_new]}" | median)
    printf '%-36s %10s %10s %8s   %s |%s\n' "$name" "$o" "$n" "$(ratio "$n" "$o")" \
        "${r[${key}_old]}" "${r[${key}_new]}"
done
