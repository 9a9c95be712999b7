#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The table of msg-cost.sh --short: instructions per message, split by
# object, each zv transport beside the UCX transport it stands beside.
# usage: contrib/bench/cost-report.sh COST_DAT [DEVICE]
#        (COST_DAT: "measure transport total own ucx verbs other" lines)
set -eu
dat=${1:?usage: cost-report.sh COST_DAT [DEVICE]}
dev=${2:-the device}
# zv transport -> the UCX transport it stands beside (uc_zv: UCX has no UC
# transport; rc_verbs is what its users would otherwise run)
awk -v dev="$dev" -v pairs="rc_zv:rc_verbs uc_zv:rc_verbs ud_zv:ud_verbs" '
BEGIN {
    n = split(pairs, p, " "); for (i = 1; i <= n; ++i) { split(p[i], a, ":"); peer[a[1]] = a[2] }
    title["uct_am_short_8"] = "UCT am_short 8 B"; title["uct_am_bcopy_512"] = "UCT am_bcopy 512 B"
    title["ucp_tag_4096"] = "UCP tag 4 KiB"; title["ucp_tag_1048576"] = "UCP tag 1 MiB"
}
NF == 7 {
    m = ($1 in title) ? title[$1] : $1
    if (!(m in seen)) { seen[m] = 1; order[++nm] = m }
    v[m, $2] = $3 " " $4 " " $5 " " $6 " " $7; have[m, $2] = 1
}
function ratio(a, b) { return (b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
END {
    print "== Instructions per message, counted on " dev " (callgrind), the figure that carries over to real hardware"
    print "   Neither the emulator'"'"'s speed nor the host'"'"'s load moves a count, and on a real HCA, where the device and"
    print "   the wire take little time, these instructions are most of a small message'"'"'s latency. Split by object:"
    print "   own = the transport'"'"'s code (libuct_zv, UCX'"'"'s libuct_ib), where zv should be ahead; UCX = UCP, UCS and"
    print "   UCT'"'"'s base; verbs = libibverbs and its provider (rxe'"'"'s is software and costs the same under both; a"
    print "   real HCA'"'"'s is a few stores); other = libc (copies) and the benchmark. Send calls and both sides'"'"' progress."
    print "   One exception: UCP 1 MiB over ud and uc_zv runs their software reliability, whose acks and resends"
    print "   follow the timing; that count moves with the load (by up to a fifth between runs), the others by ~1 %."
    printf "%-20s %-9s %9s %8s %8s %8s %7s  %-24s\n", "measure", "transport", "total", "own", "UCX", "verbs", "other", "zv/peer: total, own code"
    order_t = "rc_verbs rc_zv uc_zv ud_verbs ud_zv"; nt = split(order_t, T, " ")
    for (i = 1; i <= nm; ++i) {
        m = order[i]; first = 1
        for (j = 1; j <= nt; ++j) {
            t = T[j]; if (!((m, t) in have)) continue
            split(v[m, t], c, " ")
            r = ""
            if ((t in peer) && ((m, peer[t]) in have)) {
                split(v[m, peer[t]], q, " ")
                r = sprintf("%s, %s (vs %s)", ratio(c[1], q[1]), ratio(c[2], q[2]), peer[t])
            }
            printf "%-20s %-9s %9s %8s %8s %8s %7s  %s\n", first ? m : "", t, c[1], c[2], c[3], c[4], c[5], r
            first = 0
        }
    }
}' "$dat"
