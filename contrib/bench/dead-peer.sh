#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# How long a sender takes to learn that its peer died: a UCP sender streams
# 64-byte tag messages (UCP_ERR_HANDLING_MODE_PEER, contrib/bench/
# zv_dead_peer) to a receiver that is killed with SIGKILL; the time from the
# kill to the endpoint's error callback, over each zv transport beside UCX's
# own (rc_verbs with ud_verbs, ud_verbs), in one run, rounds interleaved,
# the median and the min-max of the rounds printed.
#
# Usage: contrib/bench/dead-peer.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
# Environment: ZV_BENCH_ROUNDS (rounds per transport, default 3),
# ZV_BENCH_TLS (default "rc_verbs ud_verbs rc_zv ud_zv uc_zv"),
# ZV_BENCH_LIMIT (seconds a sender waits for the error, default 90; rxe
# takes rc_verbs' default retry count, 7, as "retry forever").
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-3}
tls=${ZV_BENCH_TLS:-rc_verbs ud_verbs rc_zv ud_zv uc_zv}
limit=${ZV_BENCH_LIMIT:-90}
case $rounds in ''|*[!0-9]*|0) echo "dead-peer: ZV_BENCH_ROUNDS must be a positive count, not '$rounds'" >&2; exit 1 ;; esac

bench_in_vm -- "$b"

prog=$b/contrib/bench/zv_dead_peer
mod=$b/.libs/libuct_zv.so.0
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# once TL: seconds from the receiver's SIGKILL to the sender's error, or
# "n/a (why)".
once() {
    local tl=$1 tlsv=$1 pre=
    case $tl in rc_verbs) tlsv=rc_verbs,ud_verbs ;; *_zv) pre=$mod ;; esac
    rm -f "$tmp/addr" "$tmp/send.out"
    LD_PRELOAD=$pre UCX_TLS=$tlsv "$prog" serve "$tmp/addr" > "$tmp/serve.out" 2>&1 &
    local srv=$! i
    for i in $(seq 100); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
    timeout -s KILL $((limit + 30)) env LD_PRELOAD="$pre" UCX_TLS="$tlsv" \
        "$prog" send "$tmp/addr" "$limit" > "$tmp/send.out" 2>&1 &
    local snd=$!
    for i in $(seq 300); do grep -q '^ready' "$tmp/send.out" && break; sleep 0.1; done
    if ! grep -q '^ready' "$tmp/send.out"; then
        kill -9 $srv 2>/dev/null; pkill -9 -x zv_dead_peer; wait $srv $snd 2>/dev/null
        echo "n/a (not ready: $(tail -n 1 "$tmp/send.out" | head -c 80))"; return
    fi
    sleep 1
    local k; k=$(date +%s.%N)
    kill -9 $srv; wait $srv 2>/dev/null
    wait $snd 2>/dev/null || true
    awk -v k="$k" '/^failed / { printf "%.1f\n", $NF - k; f = 1 }
                   END { if (!f) print "none" }' "$tmp/send.out"
}

echo "== time from a peer's SIGKILL to the sender's endpoint error, $dev ($rounds rounds, interleaved;"
echo "   'none': no error within $limit s)"
echo "   (UCX's defaults: rc_verbs RC_TIMEOUT and RC_RETRY_COUNT, ud_verbs UD_TIMEOUT;"
echo "    zv: UCX_RC_ZV_TIMEOUT and RETRY_COUNT, UCX_UD_ZV_TIMEOUT, UCX_UC_ZV_TIMEOUT)"
declare -A got
for r in $(seq "$rounds"); do
    for tl in $tls; do
        v=$(once "$tl")
        got[$tl]+="$v "
        echo "   round $r of $rounds, $tl: $v"
    done
done
printf '%-10s %8s %8s %8s   %s\n' transport median min max rounds
for tl in $tls; do
    echo "$tl ${got[$tl]}" | awk '{
        n = 0; bad = ""
        for (i = 2; i <= NF; ++i) { if ($i ~ /^[0-9.]+$/) v[n++] = $i + 0; else bad = bad " " $i }
        if (n == 0) { printf "%-10s %8s %8s %8s   %s\n", $1, "none", "", "", substr($0, length($1) + 2); next }
        for (i = 0; i < n; ++i) for (j = i + 1; j < n; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        printf "%-10s %7.1fs %7.1fs %7.1fs   %s\n", $1, v[int((n - 1) / 2)], v[0], v[n - 1], substr($0, length($1) + 2) }'
done
