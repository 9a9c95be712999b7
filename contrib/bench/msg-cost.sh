#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per message (valgrind's callgrind, contrib/bench/zv_msg_cost):
# the send call plus the progress calls of both sides, without the polls
# that found nothing, for each zv transport beside the UCX transport it
# stands in for, in one run on one device. Counts, not times: neither the
# emulator's speed nor the host's load moves them, and on a real HCA they
# are the software part of the latency.
#
# Usage: contrib/bench/msg-cost.sh [--short] [BUILD_DIR]   (default: ./build)
# Without an active RDMA port here, it runs itself in the Soft-RoCE VM.
#
# --short (the main job's headline, a few minutes in the VM): UCT am_short
# 8 B and am_bcopy 512 B, UCP tag 4 KiB and 1 MiB (below and above the
# rendezvous threshold), each count split by object: the transport's own
# code (libuct_zv, libuct_ib), UCX's common layers (libucp, libucs,
# libuct), libibverbs with its provider, and the rest. All measurements of
# a transport run in one process (one valgrind start), two processes at a
# time. Writes ZV_BENCH_OUT/cost.dat (default BUILD_DIR/msg-cost:
# "measure transport total own ucx verbs other", per message) and prints
# the table (contrib/bench/cost-report.sh).
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
short=0
if [ "${1:-}" = --short ]; then short=1; shift; fi
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
if [ $short = 1 ]; then rounds=${ZV_BENCH_ROUNDS:-100}; else rounds=${ZV_BENCH_ROUNDS:-200}; fi
window=${ZV_BENCH_WINDOW:-16}
case $window in ''|*[!0-9]*|0) echo "msg-cost: ZV_BENCH_WINDOW must be a positive count, not '$window'" >&2; exit 1 ;; esac

# shellcheck source=contrib/bench/bench-lib.sh
. "$src/contrib/bench/bench-lib.sh"   # ratio, bench_in_vm
short_args=()
[ $short = 0 ] || short_args=(--short)
bench_in_vm --mem 4G ${ZV_BENCH_OUT:+--share "$(mkdir -p "$ZV_BENCH_OUT" && cd "$ZV_BENCH_OUT" && pwd)"} \
    -- ${short_args[@]+"${short_args[@]}"} "$b"
command -v valgrind > /dev/null || { echo "msg-cost: valgrind is not installed (contrib/setup.sh installs it)" >&2; exit 1; }

mod=${ZV_BENCH_MODULE:-$b/.libs/libuct_zv.so.0}
prog=$b/contrib/bench/zv_msg_cost
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
export UCX_NET_DEVICES=$dev:1 UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $short = 1 ]; then
    # ---- the short form: per transport one process, its measurements in a row
    out=${ZV_BENCH_OUT:-$b/msg-cost}
    mkdir -p "$out"; out=$(cd "$out" && pwd)
    srounds=$rounds
    # 1 MiB messages: rc's rendezvous costs thousands of instructions and
    # how many polls find its completions varies, so it takes 10 rounds; ud's
    # bcopy pipeline and uc_zv's packet per MTU cost ~1.6M, the same every
    # time, so 3
    big_rc=$(( srounds / 10 > 3 ? srounds / 10 : 3 ))
    big_ud=$(( srounds / 32 > 3 ? srounds / 32 : 3 ))
    tls_of() { case $1 in rc_verbs) echo rc_verbs,ud_verbs ;; *) echo "$1" ;; esac; }
    specs() { # TRANSPORT: its measurements, "--" between them, in the order of 'measures'
        local big=$big_ud
        case $1 in rc_*) big=$big_rc ;; esac
        echo "uct $1 $dev:1 am_short 8 $srounds -- uct $1 $dev:1 am_bcopy 512 $srounds" \
             "-- ucp:$(tls_of "$1") 4096 $srounds -- ucp:$(tls_of "$1") 1048576 $big"
    }
    measures=(uct_am_short_8 uct_am_bcopy_512 ucp_tag_4096 ucp_tag_1048576)   # cost.dat's names
    # suite NAME TRANSPORT...: one valgrind process measuring each transport in turn
    suite() {
        local name=$1 t spec=(); shift
        for t in "$@"; do
            [ ${#spec[@]} = 0 ] || spec+=(--)
            # shellcheck disable=SC2207  # the words of specs are plain
            spec+=($(specs "$t"))
        done
        rm -rf "${tmp:?}/$name"; mkdir -p "$tmp/$name"
        LD_PRELOAD=$mod timeout 1500 valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
            --callgrind-out-file="$tmp/$name/cg.out" "$prog" "${spec[@]}" > "$tmp/$name/out" 2> "$tmp/$name/err"
    }
    # Two processes at a time, about as long as each other (ud's and uc_zv's
    # 1 MiB messages are a bcopy pipeline or one packet per MTU: heavy).
    suite a ud_verbs rc_verbs rc_zv & pa=$!
    suite b ud_zv uc_zv & pb=$!
    sa=0 sb=0
    wait $pa || sa=$?
    wait $pb || sb=$?
    : > "$out/cost.dat"
    # collect NAME STATUS TRANSPORT...: cost.dat lines of one process
    collect() {
        local name=$1 st=$2 t m i=0 n e k; shift 2
        exec 3< "$tmp/$name/out"
        for t in "$@"; do
            for m in "${measures[@]}"; do
                i=$((i + 1))
                if ! read -r _ n _ e _ k <&3 || [ ! -s "$tmp/$name/cg.out.$((2 * i))" ]; then
                    echo "msg-cost: $t, $m: no figures (status $st): $(grep -v '^==\|hwloc\|HWLOC' "$tmp/$name/err" | tail -2 | tr '\n' ' ' | cut -c1-160)" >&2
                    continue
                fi
                awk -v n="$n" -v e="$e" -v k="$k" -v label="$m $t" \
                    -f "$src/contrib/bench/cg-objects.awk" "$tmp/$name/cg.out.$((2 * i - 1))" \
                    "$tmp/$name/cg.out.$((2 * i))" >> "$out/cost.dat"
            done
        done
        exec 3<&-
    }
    collect a $sa ud_verbs rc_verbs rc_zv
    collect b $sb ud_zv uc_zv
    "$src/contrib/bench/cost-report.sh" "$out/cost.dat" "$dev"
    [ $sa = 0 ] && [ $sb = 0 ]
    exit
fi

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
