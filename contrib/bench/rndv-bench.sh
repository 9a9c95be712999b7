#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Rendezvous (1 MiB UCP tag messages) over rc_zv beside UCX's rc_verbs, in
# one run on one device, the two interleaved (their order alternates from
# round to round), in three patterns:
#   rtt     a single blocking round trip: tag_lat, MB/s of one message each way
#   o1, o4  a stream with 1 or 4 messages outstanding: tag_bw -O 1 / -O 4
#   o32     a deep window: tag_bw's default window of 32
# each quiet and with one busy process (a spinning shell) beside the two
# ranks. Prints medians (MB/s, higher is better), rc_zv/rc_verbs per
# pattern and load, and each transport's busy/quiet ratio: the target is
# rc_zv/rc_verbs >= 1.0 quiet and busy, and busy/quiet equal for both.
# Beside them, the raw floor on the same device in the same rounds:
# perftest's ib_read_bw (what a get-zcopy rendezvous does on the wire) and
# ib_write_bw at the same size, and rc_zv's deep window against them.
#
# Usage: contrib/bench/rndv-bench.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM
# (2 vCPUs: one per rank; the busy process is the third runnable task).
# Environment: ZV_BENCH_ROUNDS (default 3), ZV_BENCH_BW_ITERS (messages per
# tag_bw run, default 60), ZV_BENCH_LAT_ITERS (round trips per tag_lat run,
# default 30), ZV_BENCH_SIZE (default 1048576), ZV_BENCH_PATTERNS (default
# "rtt o1 o4 o32"), ZV_BENCH_LOADS (default "quiet busy").
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}
bw_iters=${ZV_BENCH_BW_ITERS:-60}
lat_iters=${ZV_BENCH_LAT_ITERS:-30}
size=${ZV_BENCH_SIZE:-1048576}
patterns=${ZV_BENCH_PATTERNS:-rtt o1 o4 o32}
loads=${ZV_BENCH_LOADS:-quiet busy}

bench_in_vm -- "$b"

mod=$b/.libs/libuct_zv.so.0
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d)
cleanup() { stop_busy; rm -rf "$tmp"; }
trap cleanup EXIT

# perftest's GID: on RoCE the IPv4-mapped one (like UCX_ZV_GID_INDEX=auto)
gid=$(ibv_devinfo -v -d "$dev" | awk '/GID\[ *[0-9]+\]:.*::ffff:/ {gsub(/[^0-9]/, "", $1); print $1; exit}')

# floor TOOL: one perftest server/client pair; its average MiB/s as MB/s
floor() {
    local tool=$1 port=$((20000 + RANDOM % 20000)) try
    for try in 1 2; do   # the server may take longer than the pause to listen
        timeout 300 $tool -d "$dev" -x "${gid:-0}" -s "$size" -n "$bw_iters" -p $port > "$tmp/fs" 2>&1 &
        local spid=$!
        sleep $((try * 2))
        if timeout 300 $tool -d "$dev" -x "${gid:-0}" -s "$size" -n "$bw_iters" -p $port 127.0.0.1 \
                > "$tmp/fc" 2>&1; then
            wait $spid || true
            break
        fi
        kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true
        port=$((port + 1))
    done
    awk -v s="$size" '$1 == s && NF >= 4 && $4 ~ /^[0-9.]+$/ {v = sprintf("%.2f", $4 * 1.048576)} END {print (v == "" ? "nan" : v)}' "$tmp/fc"
}

tls_of() { case $1 in rc_verbs) echo rc_verbs,ud_verbs,self ;; *) echo "$1,self" ;; esac; }

# run TL PATTERN: one ucx_perftest server + client; prints MB/s ("nan" if
# the run printed no result: it then shows in the raw figures).
run() {
    local tl=$1 pat=$2 args col
    case $pat in
    rtt) args=(-t tag_lat -n "$lat_iters"); col=5 ;;   # overall latency, us
    o*)  args=(-t tag_bw -O "${pat#o}" -n "$bw_iters"); col=7 ;;  # overall MB/s
    esac
    UCX_TLS=$(tls_of "$tl") pt_pair "$tmp/cli" -s "$size" "${args[@]}"
    local v; v=$(pt_column $col "$tmp/cli")
    if [ "$pat" = rtt ]; then   # half a round trip per message: MB/s
        awk -v s="$size" -v us="$v" 'BEGIN { if (us + 0 > 0) printf "%.2f\n", s / us; else print "nan" }'
    else
        echo "$v"
    fi
}

declare -A r
echo "== rendezvous: rc_zv beside rc_verbs on $dev, $size B, $rounds rounds, patterns: $patterns"
for ((i = 1; i <= rounds; ++i)); do
    order="rc_verbs rc_zv"; [ $((i % 2)) = 1 ] || order="rc_zv rc_verbs"
    for load in $loads; do
        if [ "$load" = busy ]; then
            start_busy
        fi
        for pat in $patterns; do
            for tl in $order; do
                echo "round $i/$rounds: $load $pat $tl" >&2
                r[$tl.$load.$pat]+=" $(run "$tl" "$pat")"
            done
        done
        for tool in ib_read_bw ib_write_bw; do
            echo "round $i/$rounds: $load $tool" >&2
            r[$tool.$load]+=" $(floor $tool)"
        done
        stop_busy
    done
done
declare -A m
for k in "${!r[@]}"; do m[$k]=$(echo "${r[$k]}" | median); done

echo
echo "rendezvous MB/s, medians of $rounds (rtt: size / half round trip); ratios in one run"
printf '%-8s %-6s %10s %10s %14s\n' pattern load rc_verbs rc_zv zv/verbs
for pat in $patterns; do
    for load in $loads; do
        printf '%-8s %-6s %10s %10s %14s\n' "$pat" "$load" "${m[rc_verbs.$load.$pat]}" \
            "${m[rc_zv.$load.$pat]}" "$(ratio "${m[rc_zv.$load.$pat]}" "${m[rc_verbs.$load.$pat]}")"
    done
done
# (Both loads measured. One pattern with both names would need two spaces
# between them: " quiet busy " has one.)
if [[ " $loads " == *" quiet "* && " $loads " == *" busy "* ]]; then
    echo
    echo "busy/quiet per transport (the target: the same for both)"
    printf '%-8s %10s %10s\n' pattern rc_verbs rc_zv
    for pat in $patterns; do
        printf '%-8s %10s %10s\n' "$pat" "$(ratio "${m[rc_verbs.busy.$pat]}" "${m[rc_verbs.quiet.$pat]}")" \
            "$(ratio "${m[rc_zv.busy.$pat]}" "${m[rc_zv.quiet.$pat]}")"
    done
fi
echo
echo "the floor: perftest on $dev, $size B, MB/s, and rc_zv's deep window (o32) against it"
printf '%-6s %11s %11s %13s %13s\n' load ib_read_bw ib_write_bw zv_o32/read zv_o32/write
for load in $loads; do
    for k in ib_read_bw.$load ib_write_bw.$load; do m[$k]=$(echo "${r[$k]}" | median); done
    printf '%-6s %11s %11s %13s %13s\n' "$load" "${m[ib_read_bw.$load]}" "${m[ib_write_bw.$load]}" \
        "$(ratio "${m[rc_zv.$load.o32]:-}" "${m[ib_read_bw.$load]}")" \
        "$(ratio "${m[rc_zv.$load.o32]:-}" "${m[ib_write_bw.$load]}")"
done
echo "raw: $(for k in $(printf '%s\n' "${!r[@]}" | sort); do printf '%s=[%s ] ' "$k" "${r[$k]}"; done)"
