#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The software-reliable transports beside their peers, in one run on one
# device, peers interleaved.
# ud_zv beside UCX's ud_verbs:
#   - UCT am_lat at 8 B (median latency of ucx_perftest), quiet and with
#     one busy process beside the ranks (and each one's busy/quiet),
#   - UCP tag_bw at 1 MiB (UCX_TLS=<tl>,self),
#   - the same for ud_zv with 1 % of received packets dropped, duplicated
#     and reordered by its fault injection (ud_verbs has no such setting:
#     loss for both needs the two-host wire with netem).
# (Memory per endpoint: contrib/bench/ep-cost.sh.)
# uc_zv beside rc_zv and UCX's rc_verbs:
#   - UCT put_lat at 8 B and put_bw at uc_zv's largest write (16 KiB; one
#     MTU on Soft-RoCE, where UCX_UC_ZV_ONE_PACKET=auto keeps every put
#     within one packet), zero-copy,
#   - UCP tag_bw at 1 MiB, and uc_zv's with 1 % faults injected.
# Prints tables with ratios.
#
# Usage: contrib/bench/rel-bench.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
# Environment: ZV_BENCH_ROUNDS (default 3), ZV_BENCH_LAT_ITERS (default
# 20000), ZV_BENCH_BW_ITERS (default 100).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}
lat_iters=${ZV_BENCH_LAT_ITERS:-20000}
bw_iters=${ZV_BENCH_BW_ITERS:-100}

bench_in_vm -- "$b"

mod=$b/.libs/libuct_zv.so.0
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n
tmp=$(mktemp -d)
# uc_zv's largest put here, from ucx_info ("put_zcopy: <= 1K, ...").
put_size=$(LD_PRELOAD=$mod ucx_info -d 2>/dev/null |
    awk '/Transport: uc_zv/ {f = 1} f && /put_zcopy:/ {
             v = $0; sub(/.*put_zcopy: *(<= *)?/, "", v); sub(/,.*/, "", v); sub(/.*\.\./, "", v)
             m = 1; if (v ~ /K$/) m = 1024; if (v ~ /M$/) m = 1048576
             sub(/[KM]$/, "", v); print v * m; exit }')
put_size=${put_size:-16384}

# pt COLUMN ARGS...: run ucx_perftest server + client, print one column of
# the client's final line (-f): 3 = median latency, 7 = overall MB/s.
pt() {
    local col=$1; shift
    pt_pair "$tmp/cli" "$@"
    pt_column "$col" "$tmp/cli"
}

trap 'stop_busy; rm -rf "$tmp"' EXIT

declare -A r
for ((i = 1; i <= rounds; ++i)); do
    echo "round $i/$rounds" >&2
    # am_lat quiet, then with one busy process beside the ranks; the order
    # of the two transports alternates between rounds.
    order="v z"; [ $((i % 2)) = 1 ] || order="z v"
    for load in "" b; do
        [ -z "$load" ] || start_busy
        for t in $order; do
            tl=ud_verbs; [ $t = v ] || tl=ud_zv
            r[lat_$t$load]+=" $(pt 3 -t am_lat -x $tl -d "$dev:1" -s 8 -n "$lat_iters")"
        done
        stop_busy
    done
    r[lat_zl]+=" $(ZV_TESTING_UD_ZV_FAULT_DROP=0.01 ZV_TESTING_UD_ZV_FAULT_DUP=0.01 ZV_TESTING_UD_ZV_FAULT_REORDER=0.01 \
                  pt 3 -t am_lat -x ud_zv -d "$dev:1" -s 8 -n "$lat_iters")"
    r[bw_v]+=" $(UCX_TLS=ud_verbs,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[bw_z]+=" $(UCX_TLS=ud_zv,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[bw_zl]+=" $(ZV_TESTING_UD_ZV_FAULT_DROP=0.01 ZV_TESTING_UD_ZV_FAULT_DUP=0.01 ZV_TESTING_UD_ZV_FAULT_REORDER=0.01 \
                  UCX_TLS=ud_zv,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    for tl in rc_verbs rc_zv uc_zv; do
        r[plat_$tl]+=" $(pt 3 -t put_lat -x $tl -d "$dev:1" -s 8 -n "$lat_iters")"
        r[pbw_$tl]+=" $(pt 7 -t put_bw -x $tl -d "$dev:1" -D zcopy -s "$put_size" -n $((bw_iters * 20)))"
    done
    r[tbw_rc_verbs]+=" $(UCX_TLS=rc_verbs,ud_verbs,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[tbw_rc_zv]+=" $(UCX_TLS=rc_zv,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[tbw_uc_zv]+=" $(UCX_TLS=uc_zv,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[tbw_uc_zv_l]+=" $(ZV_TESTING_UC_ZV_FAULT_DROP=0.01 ZV_TESTING_UC_ZV_FAULT_DUP=0.01 ZV_TESTING_UC_ZV_FAULT_REORDER=0.01 \
                       UCX_TLS=uc_zv,self pt 7 -t tag_bw -s 1048576 -n "$bw_iters")"
    r[plat_uc_zv_l]+=" $(ZV_TESTING_UC_ZV_FAULT_DROP=0.01 ZV_TESTING_UC_ZV_FAULT_DUP=0.01 ZV_TESTING_UC_ZV_FAULT_REORDER=0.01 \
                        pt 3 -t put_lat -x uc_zv -d "$dev:1" -s 8 -n "$lat_iters")"
done
declare -A m
for k in "${!r[@]}"; do m[$k]=$(echo "${r[$k]}" | median); done

echo
echo "ud_zv vs ud_verbs on $dev ($rounds rounds, medians; one run, peers interleaved)"
printf '%-34s %12s %12s %8s\n' "measure" "ud_verbs" "ud_zv" "zv/verbs"
printf '%-34s %12s %12s %8s\n' "am_lat 8 B, median us (lower=better)" "${m[lat_v]}" "${m[lat_z]}" "$(ratio "${m[lat_z]}" "${m[lat_v]}")"
printf '%-34s %12s %12s %8s\n' "am_lat 8 B, one busy process" "${m[lat_vb]}" "${m[lat_zb]}" "$(ratio "${m[lat_zb]}" "${m[lat_vb]}")"
printf '%-34s %12s %12s %8s\n' "am_lat busy/quiet" "$(ratio "${m[lat_vb]}" "${m[lat_v]}")" "$(ratio "${m[lat_zb]}" "${m[lat_z]}")" "-"
printf '%-34s %12s %12s %8s\n' "tag_bw 1 MiB, MB/s (higher=better)" "${m[bw_v]}" "${m[bw_z]}" "$(ratio "${m[bw_z]}" "${m[bw_v]}")"
printf '%-34s %12s %12s %8s\n' "am_lat 8 B, 1% faults injected" "n/a" "${m[lat_zl]}" "-"
printf '%-34s %12s %12s %8s\n' "tag_bw 1 MiB, 1% faults injected" "n/a" "${m[bw_zl]}" "-"
echo "raw: $(for k in lat_v lat_z lat_vb lat_zb lat_zl bw_v bw_z bw_zl; do printf '%s=[%s ] ' $k "${r[$k]}"; done)"

echo
echo "uc_zv vs rc_zv and rc_verbs on $dev ($rounds rounds, medians)"
printf '%-34s %10s %10s %10s %9s %9s\n' "measure" "rc_verbs" "rc_zv" "uc_zv" "uc/rc_zv" "uc/verbs"
row() { printf '%-34s %10s %10s %10s %9s %9s\n' "$1" "${m[${2}rc_verbs]}" "${m[${2}rc_zv]}" "${m[${2}uc_zv]}" \
            "$(ratio "${m[${2}uc_zv]}" "${m[${2}rc_zv]}")" "$(ratio "${m[${2}uc_zv]}" "${m[${2}rc_verbs]}")"; }
row "put_lat 8 B, median us (lower)" plat_
row "put_bw $put_size B, MB/s (higher)" pbw_
row "tag_bw 1 MiB, MB/s (higher)" tbw_
printf '%-34s %10s %10s %10s\n' "put_lat 8 B, uc 1% faults" "n/a" "n/a" "${m[plat_uc_zv_l]}"
printf '%-34s %10s %10s %10s\n' "tag_bw 1 MiB, uc 1% faults" "n/a" "n/a" "${m[tbw_uc_zv_l]}"
echo "raw: $(for k in "${!r[@]}"; do printf '%s=[%s ] ' $k "${r[$k]}"; done)"
