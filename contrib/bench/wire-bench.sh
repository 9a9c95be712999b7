#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The zv transports beside UCX's verbs transports across a real wire: two
# Soft-RoCE VMs (contrib/vm/run2.sh), ucx_perftest server on zv-b, client on
# zv-a, clean and with netem loss on both NICs, peers interleaved.
#   - UCT am_lat 8 B: ud_zv vs ud_verbs (median us),
#   - UCT put_lat 8 B: uc_zv and rc_zv vs rc_verbs (median us),
#   - UCP tag_bw 1 MiB: ud_zv vs ud_verbs, uc_zv and rc_zv vs rc_verbs (MB/s).
# This is where ud_verbs and rc_verbs can be given loss too (inside one VM
# rxe never puts a packet on a NIC). Prints tables with ratios.
#
# Usage: contrib/bench/wire-bench.sh [BUILD_DIR]   (default: ./build)
# Environment: ZV_BENCH_ROUNDS (default 3), ZV_BENCH_LAT_ITERS (default
# 2000), ZV_BENCH_BW_ITERS (default 10), ZV_BENCH_LOSS (netem words,
# default "loss 1%").
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}
lat_iters=${ZV_BENCH_LAT_ITERS:-2000}
bw_iters=${ZV_BENCH_BW_ITERS:-10}
loss=${ZV_BENCH_LOSS:-loss 1%}

if [ "${ZV_TWO_HOST:-0}" != 1 ]; then
    ucx_src=$(sed -n 's/^UCX_SRC = //p' "$b/Makefile")
    exec "$src/contrib/vm/run2.sh" --timeout 5400 --share "$src" --share "$b" \
        ${ucx_src:+--share "$ucx_src"} -e ZV_BENCH_ROUNDS="$rounds" \
        -e ZV_BENCH_LAT_ITERS="$lat_iters" -e ZV_BENCH_BW_ITERS="$bw_iters" \
        -e ZV_BENCH_LOSS="$loss" -- "$0" "$b"
fi

peer=zv-b
mod=$b/.libs/libuct_zv.so.0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
envs="LD_PRELOAD=$mod UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n"

# pt COLUMN [VAR=VALUE...] -- PERFTEST_ARGS...: server on zv-b, client
# here; one column of the client's final line (3 = median latency, 7 =
# overall MB/s), "nan" when the run failed.
pt() {
    local col=$1; shift
    local extra=()
    while [ "$1" != -- ]; do extra+=("$1"); shift; done
    shift
    local port=$((20000 + RANDOM % 20000)) w
    # shellcheck disable=SC2029  # expanded here on purpose
    ssh $peer "env $envs ${extra[*]} timeout 300 ucx_perftest -p $port $*" >"$tmp/srv" 2>&1 &
    local spid=$!
    for ((w = 0; w < 120; ++w)); do
        ssh $peer ss -ltn 2>/dev/null | grep -q ":$port " && break
        sleep 0.5
    done
    # shellcheck disable=SC2086
    env $envs "${extra[@]}" timeout 300 ucx_perftest -p $port -f "$@" $peer >"$tmp/cli" 2>&1 || true
    wait $spid || true
    pt_column "$col" "$tmp/cli"
}

declare -A r
for ((i = 1; i <= rounds; ++i)); do
    for w in clean loss; do
        if [ $w = loss ]; then
            # shellcheck disable=SC2086  # netem words
            zv-wire both $loss >/dev/null
        fi
        echo "round $i/$rounds, $w wire" >&2
        for tl in ud_verbs ud_zv; do
            r[$w.amlat.$tl]+=" $(pt 3 -- -t am_lat -x $tl -d rxe0:1 -s 8 -n "$lat_iters")"
        done
        for tl in rc_verbs rc_zv uc_zv; do
            r[$w.putlat.$tl]+=" $(pt 3 -- -t put_lat -x $tl -d rxe0:1 -s 8 -n "$lat_iters")"
        done
        r[$w.tagbw.ud_verbs]+=" $(pt 7 UCX_TLS=ud_verbs,self -- -t tag_bw -s 1048576 -n "$bw_iters")"
        r[$w.tagbw.ud_zv]+=" $(pt 7 UCX_TLS=ud_zv,self -- -t tag_bw -s 1048576 -n "$bw_iters")"
        r[$w.tagbw.rc_verbs]+=" $(pt 7 UCX_TLS=rc_verbs,ud_verbs,self -- -t tag_bw -s 1048576 -n "$bw_iters")"
        r[$w.tagbw.rc_zv]+=" $(pt 7 UCX_TLS=rc_zv,self -- -t tag_bw -s 1048576 -n "$bw_iters")"
        r[$w.tagbw.uc_zv]+=" $(pt 7 UCX_TLS=uc_zv,self -- -t tag_bw -s 1048576 -n "$bw_iters")"
        zv-wire both clear >/dev/null
    done
done
declare -A m
for k in "${!r[@]}"; do m[$k]=$(echo "${r[$k]}" | median); done

echo
echo "across the wire zv-a <-> zv-b ($rounds rounds, medians; loss = netem '$loss' on both NICs)"
printf '%-30s %-6s %10s %10s %10s %9s %9s\n' measure wire peer zv_1 zv_2 "zv_1/peer" "zv_2/peer"
line() { # NAME KEY PEER ZV1 [ZV2]
    local w
    for w in clean loss; do
        local p=${m[$w.$2.$3]:-nan} z1=${m[$w.$2.$4]:-nan} z2=${5:+${m[$w.$2.$5]:-nan}}
        printf '%-30s %-6s %10s %10s %10s %9s %9s\n' "$1" $w "$p" "$z1" "${z2:--}" \
            "$(ratio "$z1" "$p")" "$([ -n "$z2" ] && ratio "$z2" "$p" || echo -)"
    done
}
echo "(peer, zv_1, zv_2: ud_verbs, ud_zv, - for the ud rows; rc_verbs, rc_zv, uc_zv for the rc rows)"
line "am_lat 8 B, us (lower)" amlat ud_verbs ud_zv
line "tag_bw 1 MiB, MB/s (higher)" tagbw ud_verbs ud_zv
line "put_lat 8 B, us (lower)" putlat rc_verbs rc_zv uc_zv
line "tag_bw 1 MiB, MB/s (higher)" tagbw rc_verbs rc_zv uc_zv
echo "raw: $(for k in $(printf '%s\n' "${!r[@]}" | sort); do printf '%s=[%s ] ' "$k" "${r[$k]}"; done)"
