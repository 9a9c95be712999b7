#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per message (valgrind's callgrind, contrib/bench/zv_msg_cost):
# the send call plus the progress calls of both sides, without the polls
# that found nothing, for each zv transport beside the UCX transport it
# stands in for, in one run on one device. Counts, not times: neither the
# emulator's speed nor the host's load moves them, and on a real HCA they
# are the software part of the latency.
#
# Usage: contrib/bench/msg-cost.sh [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
# Environment: ZV_BENCH_ROUNDS (ping-pong rounds per figure, default 200;
# a tenth of it for the 1 MiB UCP message), ZV_BENCH_WINDOW (messages per
# turn of the stream rows, default 16), ZV_BENCH_MODULE (the zv module to
# measure, default BUILD_DIR's: e.g. an older build's, to compare).
#
# What each row measures:
#   am_short 8 B, am_bcopy 512 B, put_zcopy 64 KiB: UCT, rc_zv/uc_zv beside
#     rc_verbs, ud_zv beside ud_verbs (ud has no put);
#   tag 4 KiB and tag 1 MiB: UCP tag messages below and above the
#     rendezvous threshold, UCX_TLS=<transport> (no shared memory);
#   "stream": the same operations, ZV_BENCH_WINDOW messages posted back to
#     back each turn (1 MiB: 4, the few outstanding of a rendezvous
#     stream), so that what is paid once per batch (a moderated send
#     completion, an acknowledgement of several packets) is shared out.
# Per message = (instructions collected - empty polls x one idle poll's
# instructions) / messages; the "empty/msg" column shows how many polls were
# taken out that way.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
rounds=${ZV_BENCH_ROUNDS:-200}
window=${ZV_BENCH_WINDOW:-16}
case $window in ''|*[!0-9]*|0) echo "msg-cost: ZV_BENCH_WINDOW must be a positive count, not '$window'" >&2; exit 1 ;; esac

if ! ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
    exec "$src/contrib/vm/run.sh" --timeout 3000 --cpus 2 --mem 4G --share "$src" --share "$b" \
        -e ZV_BENCH_ROUNDS="$rounds" -e ZV_BENCH_WINDOW="$window" ${ZV_BENCH_MODULE:+-e ZV_BENCH_MODULE="$ZV_BENCH_MODULE"} \
        -- "$0" "$b"
fi
command -v valgrind > /dev/null || { echo "msg-cost: valgrind is not installed (contrib/setup.sh installs it)" >&2; exit 1; }

. "$src/contrib/bench/bench-lib.sh"   # ratio
mod=${ZV_BENCH_MODULE:-$b/.libs/libuct_zv.so.0}
prog=$b/contrib/bench/zv_msg_cost
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# cost ARGS...: instructions per message of one zv_msg_cost run, then the
# empty polls per message ("n/a" and the reason on failure).
cost() {
    rm -f "$tmp"/cg.*
    if ! out=$(LD_PRELOAD=$mod timeout 1200 valgrind --tool=callgrind --collect-atstart=no \
                   --callgrind-out-file="$tmp/cg.out" "$prog" "$@" 2> "$tmp/err"); then
        echo "n/a ($(grep -v '^==\|hwloc' "$tmp/err" | tail -2 | head -c 100 | tr '\n' ' '))"
        return
    fi
    # Dumps: the first is "messages", the second "idle" (see msg_cost.cc).
    local msgs idle
    msgs=$(awk '/^summary:|^totals:/ {print $2; exit}' "$tmp/cg.out.1" 2>/dev/null || true)
    idle=$(awk '/^summary:|^totals:/ {print $2; exit}' "$tmp/cg.out.2" 2>/dev/null || true)
    local n e k
    read -r _ n _ e _ k <<< "$out"
    awk -v m="$msgs" -v i="$idle" -v n="$n" -v e="$e" -v k="$k" 'BEGIN {
        if (m == "" || i == "" || n == 0) { print "n/a (no callgrind dump)"; exit }
        printf "%.0f %.2f\n", (m - e * i / k) / n, e / n }'
}

row() { # row LABEL PEER ZV...: one line, the peer first, then each zv beside it
    local label=$1 peer=$2; shift 2
    local pc p
    read -r pc p <<< "$(cost_of "$peer")"
    local line
    line=$(printf '%-22s %-9s %9s %6s' "$label" "$peer" "$pc" "$p")
    for tl in "$@"; do
        local zc z
        read -r zc z <<< "$(cost_of "$tl")"
        line+=$(printf ' | %-7s %9s %6s %6s' "$tl" "$zc" "$z" "$(ratio "$zc" "$pc")")
    done
    echo "$line"
}

echo "== instructions per message on $dev, $mod"
echo "   (callgrind: the send calls and the progress calls of both sides that found work)"
echo "   (stream rows: $window messages posted back to back each turn, 1 MiB: 4)"
printf '%-22s %-9s %9s %6s | %s\n' measure peer instr empty "zv: instr, empty/msg, zv/peer"
# (am_bcopy: 512 B, since an MTU of 1024, Soft-RoCE's on a 1500-byte
# Ethernet, does not take 1 KiB and the headers in one datagram.)
for spec in "am_short 8" "am_bcopy 512" "put_zcopy 65536"; do
    read -r op size <<< "$spec"
    cost_of() { cost uct "$1" "$dev:1" "$op" "$size" "$rounds"; }
    row "UCT $op $size B" rc_verbs rc_zv uc_zv
    [ "$op" = put_zcopy ] || row "UCT $op $size B" ud_verbs ud_zv
done
tenth=$(( rounds / 10 > 0 ? rounds / 10 : 1 ))
# ucp_rows LABEL SIZE ROUNDS WINDOW
ucp_rows() {
    local label=$1 size=$2 n=$3 w=$4
    # UCP wires rc_verbs up through ud_verbs (its auxiliary transport); at
    # two endpoints the lanes are rc_verbs'.
    cost_of() { local t=$1; [ "$t" != rc_verbs ] || t=rc_verbs,ud_verbs; UCX_TLS=$t cost ucp "$size" "$n" "$w"; }
    row "$label" rc_verbs rc_zv uc_zv
    row "$label" ud_verbs ud_zv
}
ucp_rows "UCP tag 4096 B" 4096 "$rounds" 1
ucp_rows "UCP tag 1048576 B" 1048576 "$tenth" 1

# Streams: a turn of 'window' messages; as many messages as the ping-pong.
srounds=$(( rounds / window > 0 ? rounds / window : 1 ))
for spec in "am_short 8" "am_bcopy 512"; do
    read -r op size <<< "$spec"
    cost_of() { cost uct "$1" "$dev:1" "$op" "$size" "$srounds" "$window"; }
    row "stream $op $size B" rc_verbs rc_zv uc_zv
    row "stream $op $size B" ud_verbs ud_zv
done
ucp_rows "stream tag 4096 B" 4096 "$srounds" "$window"
ucp_rows "stream tag 1 MiB x4" 1048576 "$(( tenth / 4 > 0 ? tenth / 4 : 1 ))" 4
