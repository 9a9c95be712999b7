# SPDX-License-Identifier: BSD-3-Clause
# Instructions per message by object, from two callgrind dumps of
# zv_msg_cost (the "messages" dump, then its "idle" dump):
#   awk -v n=MESSAGES -v e=EMPTY_POLLS -v k=IDLE_POLLS -v label=LABEL \
#       -f cg-objects.awk MESSAGES_DUMP IDLE_DUMP
# prints "LABEL total own ucx verbs other": per object group, (its
# instructions in the messages dump - e x its instructions in the idle dump
# / k) / n, as msg-cost.sh takes the empty polls out of the total. Groups:
# own = the transport's code (libuct_zv, UCX's libuct_ib); ucx = UCX's
# common layers (libucp, libucs, libuct, libucm); verbs = libibverbs and
# its provider (lib*-rdmav*.so); other = the rest (libc, the benchmark,
# the inlined progress dispatch). Each cost line of the dump belongs to the
# object of its function ("ob="); a line after "calls=" is a call's
# inclusive cost, counted where the callee's own lines are, not here.
function group(o) {
    if (o ~ /\/libuct_zv\.so|\/libuct_ib\.so/) return "own"
    if (o ~ /\/libucp\.so|\/libucs\.so|\/libuct\.so|\/libucm\.so/) return "ucx"
    if (o ~ /\/libibverbs\.so|-rdmav[0-9]*\.so|\/libibverbs\//) return "verbs"
    return "other"
}
# name compression: "(id) name" defines, "(id)" refers (shared by ob and cob)
function object(s,    id, rest) {
    if (!match(s, /^\([0-9]+\)/)) return s
    id = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 2)
    if (rest != "") name[FILENAME, id] = rest
    return name[FILENAME, id]
}
FNR == 1 { ++f; g = "other"; after_call = 0 }
/^ob=/  { g = group(object(substr($0, 4))); next }
/^cob=/ { object(substr($0, 5)); next }
/^calls=/ { after_call = 1; next }
/^[0-9+*-]/ {
    if (after_call) { after_call = 0; next }
    cost[f, g] += $NF; sum[f] += $NF; next
}
/^(summary|totals):/ { total[f] = $2 }
END {
    if (f != 2 || n + 0 <= 0 || k + 0 <= 0) { print "cg-objects: want two dumps, n > 0, k > 0" > "/dev/stderr"; exit 1 }
    for (i = 1; i <= 2; ++i) if (sum[i] != total[i]) {
        printf "cg-objects: dump %d: the objects sum to %d, callgrind's total is %d\n", i, sum[i], total[i] > "/dev/stderr"; exit 1
    }
    split("own ucx verbs other", G, " ")
    line = ""; all = 0
    for (j = 1; j <= 4; ++j) {
        v = (cost[1, G[j]] - e * cost[2, G[j]] / k) / n
        line = line sprintf(" %.0f", v); all += v
    }
    printf "%s %.0f%s\n", label, all, line
}
