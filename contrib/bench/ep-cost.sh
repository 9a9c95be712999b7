#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What endpoints cost, against the number of peers, at the UCT level in one
# process (contrib/bench/zv_ep_memory: both sides of each connection):
# resident memory, heap, registered memory and queue pairs per endpoint for
# 1, 64, 1,024 and 4,096 endpoints, for rc_zv, uc_zv and ud_zv beside UCX's
# rc_verbs and ud_verbs, in one run on one device. The model in
# contrib/doc/benchmarks.md ("What endpoints cost") extrapolates from these
# figures.
#
# Usage: contrib/bench/ep-cost.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
# Environment: ZV_BENCH_EPS (default "1 64 1024 4096"), ZV_BENCH_TLS
# (default "rc_zv uc_zv ud_zv rc_verbs ud_verbs").
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
counts=${ZV_BENCH_EPS:-1 64 1024 4096}
tls=${ZV_BENCH_TLS:-rc_zv uc_zv ud_zv rc_verbs ud_verbs}

bench_in_vm --mem 4G -- "$b"

mod=$b/.libs/libuct_zv.so.0
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
# One interface opens every endpoint to one other here: past UCP's one or
# two per peer, so the per-peer-interface cap must allow them.
export UCX_RC_ZV_MAX_PEER_CONNS=65536 UCX_UC_ZV_MAX_PEER_CONNS=65536 UCX_UD_ZV_MAX_PEER_CONNS=65536
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "== cost per endpoint on $dev (both sides of each connection in one process)"
# "both": every connection used both ways (an endpoint on each side).
printf '%-9s %-9s %-5s %12s %12s %12s %8s\n' transport endpoints ways "rss B/ep" "heap B/ep" "reg B/ep" "QPs/ep"
for tl in $tls; do
    for n in $counts; do
        for way in one both; do
            args=("$tl" "$dev:1" "$n"); [ $way = one ] || args+=(both)
            if out=$(LD_PRELOAD=$mod timeout 900 "$b/contrib/bench/zv_ep_memory" "${args[@]}" 2>"$tmp/err"); then
                set -- $out
                printf '%-9s %-9s %-5s %12s %12s %12s %8s\n' "$tl" "$n" $way "$3" "$4" "$5" "$6"
            else
                printf '%-9s %-9s %-5s %12s (failed: %s)\n' "$tl" "$n" $way "-" "$(head -c 120 "$tmp/err" | tr '\n' ' ')"
            fi
        done
    done
done
