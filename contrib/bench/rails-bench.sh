#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bandwidth over two rails against one: UCP tag messages of 4 MiB
# (ucx_perftest tag_bw, window 4) over rxe0 alone and over rxe0 and rxe1
# (UCX_MAX_RNDV_RAILS=2), for rc_zv and uc_zv beside UCX's rc_verbs, in one
# run in a guest with two NICs, the runs interleaved (their order alternates
# from round to round). Prints medians (MB/s) and two-rails/one-rail per
# transport. Under emulation both rails share the guest's CPUs, so the
# ratio says whether striping costs anything more than whether it gains.
#
# Usage: contrib/bench/rails-bench.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM with
# two NICs (contrib/vm/run.sh --nics 2).
# Environment: ZV_BENCH_ROUNDS (default 3), ZV_BENCH_BW_ITERS (messages per
# run, default 40), ZV_BENCH_TLS (default "rc_verbs rc_zv uc_zv").
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}
iters=${ZV_BENCH_BW_ITERS:-40}
tls=${ZV_BENCH_TLS:-rc_verbs rc_zv uc_zv}

bench_in_vm --nics 2 -- "$b"
ibv_devices | grep -qw rxe1 || { echo "rails-bench: no second device (rxe1)" >&2; exit 1; }

mod=$b/.libs/libuct_zv.so.0
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n UCX_MAX_RNDV_RAILS=2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

declare -A got
for r in $(seq "$rounds"); do
    order="one two"; [ $((r % 2)) = 0 ] && order="two one"
    for tl in $tls; do
        use=$tl; [ "$tl" != rc_verbs ] || use=rc_verbs,ud_verbs
        for rails in $order; do
            devs=rxe0:1; [ $rails = one ] || devs=rxe0:1,rxe1:1
            UCX_TLS=$use,self UCX_NET_DEVICES=$devs pt_pair "$tmp/out" -t tag_bw \
                -s 4194304 -n "$iters" -O 4
            got[$tl.$rails]="${got[$tl.$rails]:-} $(pt_column 7 "$tmp/out")"
        done
    done
    echo "round $r of $rounds done" >&2
done

echo "== tag_bw 4 MiB, window 4, medians of $rounds rounds (MB/s)"
printf '%-9s %10s %10s %10s\n' transport "one rail" "two rails" "two/one"
for tl in $tls; do
    one=$(echo "${got[$tl.one]}" | median) two=$(echo "${got[$tl.two]}" | median)
    printf '%-9s %10s %10s %10s\n' "$tl" "$one" "$two" "$(ratio "$two" "$one")"
done
echo "(every round: $(for tl in $tls; do echo -n "$tl one [${got[$tl.one]# }] two [${got[$tl.two]# }]; "; done))"
