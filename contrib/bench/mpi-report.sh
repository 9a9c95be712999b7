#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Tables of an mpi-bench.sh run and the verdict: latency and bandwidth of
# each zv transport beside its peer (median [min-max] of the rounds; a
# ratio is called only where the two spreads do not overlap), the raw
# verbs floor, the eager->rendezvous switch, the registration cache, the
# peers not run (once, with the reason), then the verdict in words, with
# the instruction counts of msg-cost.sh --short when OUT_DIR/cost.dat holds
# them.
# usage: contrib/bench/mpi-report.sh OUT_DIR   (files written by mpi-bench.sh:
#        stats.dat switch.dat na.txt failures.txt meta.txt; cost.dat optional)
set -eu
out=${1:?usage: mpi-report.sh OUT_DIR}
[ -s "$out/stats.dat" ] || [ -s "$out/meta.txt" ] || { echo "mpi-report: no figures in $out"; exit 1; }
touch "$out/switch.dat" "$out/na.txt" "$out/failures.txt"
cost=/dev/null; [ ! -s "$out/cost.dat" ] || cost=$out/cost.dat

awk -v cost="$cost" '
function hsize(s) {
    if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) " MiB"
    if (s >= 1024 && s % 1024 == 0) return (s / 1024) " KiB"
    return s " B"
}
function fv(v) { return v >= 100 ? sprintf("%.0f", v) : v >= 10 ? sprintf("%.1f", v) : v >= 1 ? sprintf("%.2f", v) : sprintf("%.3g", v) }
function has(t, p, s) { return (t SUBSEP p SUBSEP s) in med }
function cell(t, p, s) {
    if (!has(t, p, s)) return "-"
    return fv(med[t, p, s]) " [" fv(lo[t, p, s]) "-" fv(hi[t, p, s]) "]"
}
# call TA A TB B S HIGHER_BETTER UP DOWN: figure TA of A against TB of B at
# size S, in words (UP or DOWN when A is ahead or behind beyond the spread);
# sets verdict_word to ahead, behind, same or "" (not called)
function call(ta, a, tb, b, s, higher, up, down,    r, ahead) {
    verdict_word = ""
    if (!has(ta, a, s) || !has(tb, b, s) || med[tb, b, s] <= 0 || lo[tb, b, s] <= 0 || hi[tb, b, s] <= 0) return "-"
    r = med[ta, a, s] / med[tb, b, s]
    if (cnt[ta, a, s] < 3 || cnt[tb, b, s] < 3)
        return sprintf("%.2f, not called: under 3 rounds", r)
    if (b == "perftest")   # the floor: how far above it, never "ahead"
        return sprintf("%.2f x the floor (%.2f-%.2f)", higher ? 1 / r : r,
                       higher ? lo[tb, b, s] / hi[ta, a, s] : lo[ta, a, s] / hi[tb, b, s],
                       higher ? hi[tb, b, s] / lo[ta, a, s] : hi[ta, a, s] / lo[tb, b, s])
    if (!(hi[ta, a, s] < lo[tb, b, s] || hi[tb, b, s] < lo[ta, a, s])) {
        verdict_word = "same"
        return sprintf("same within noise (%.2f-%.2f)", lo[ta, a, s] / hi[tb, b, s], hi[ta, a, s] / lo[tb, b, s])
    }
    ahead = higher ? r > 1 : r < 1
    verdict_word = ahead ? "ahead" : "behind"
    return sprintf("%.2f, %s", r, ahead ? up : down)
}
function pair_table(t, a, b, higher,    i, s, c, line) {
    if (!((t, a) in meas) || !((t, b) in meas)) return
    printf "%-9s %-24s %-24s %s\n", "size", a, b, a " vs " b
    for (i = 1; i <= nsize; ++i) {
        s = size[i]
        if (!has(t, a, s) && !has(t, b, s)) continue
        if (b == "perftest" && !has(t, b, s)) continue   # the floor: where it was measured
        c = call(t, a, t, b, s, higher, a " ahead", a " behind")
        if (verdict_word != "") tally[t, a, b, verdict_word] = tally[t, a, b, verdict_word] " " hsize(s) (verdict_word == "same" ? "" : " (" sprintf("%.2f", med[t, a, s] / med[t, b, s]) ")")
        printf "%-9s %-24s %-24s %s\n", hsize(s), cell(t, a, s), cell(t, b, s), c
    }
    print ""
}
# words T A B: the pair'"'"'s MPI comparison for the verdict
function words(t, a, b,    w, x) {
    w = ""
    if ((t, a, b, "ahead") in tally) w = w "; ahead at" tally[t, a, b, "ahead"]
    if ((t, a, b, "behind") in tally) w = w "; behind at" tally[t, a, b, "behind"]
    if ((t, a, b, "same") in tally) {
        x = tally[t, a, b, "same"]
        w = w "; the same within noise " ((w == "") ? "at every size" : "at" x)
    }
    return substr(w, 3)
}
BEGIN {
    while ((getline l < (ARGV[1] "/meta.txt")) > 0) { k = l; sub(/ .*/, "", k); v = l; sub(/^[^ ]* ?/, "", v); meta[k] = v }
    while ((getline l < (ARGV[1] "/na.txt")) > 0) { k = l; sub(/ .*/, "", k); v = l; sub(/^[^ ]* /, "", v); na[k] = v }
    while ((getline l < (ARGV[1] "/host.txt")) > 0) { split(l, f, " "); host[f[1]] = f[2] }
    while ((getline l < (ARGV[1] "/failures.txt")) > 0) { k = l; sub(/ .*/, "", k); v = l; sub(/^[^ ]* /, "", v); fails[k] = v }
    while ((getline l < (ARGV[1] "/switch.dat")) > 0) { split(l, f, " "); tsend[f[1]] = f[2]; tnbr[f[1]] = f[3] }
    while ((getline l < (ARGV[1] "/stats.dat")) > 0) {
        split(l, f, " "); t = f[1]; p = f[2]; s = f[3]
        med[t, p, s] = f[4]; lo[t, p, s] = f[5]; hi[t, p, s] = f[6]; cnt[t, p, s] = f[7]
        errs[p] += f[8]; measured[p] = 1; meas[t, p] = 1
    }
    while ((getline l < cost) > 0) {
        split(l, f, " "); if (!(f[1] in mseen)) { mseen[f[1]] = 1; morder[++nm] = f[1] }
        ctot[f[1], f[2]] = f[3]; cown[f[1], f[2]] = f[4]
    }
    nsize = split(meta["sizes"], size, " ")
    rounds = meta["rounds"]; dev = meta["device"]; vm = (meta["where"] == "vm")
    npeer = split(meta["peers"], peer, " ")

    print "== MPI latency, usec: zv_osu ping-pong (blocking MPI_Send), half a round trip; lower is better"
    printf "   median [min-max] of %s on %s%s; peers interleaved. A ratio is called only where the\n", plural(rounds, "round"), dev, vm ? " (Soft-RoCE VM)" : ""
    print "   two spreads do not overlap; otherwise \"same within noise\" with the range the ratio could take."
    pair_table("lat", "rc_zv", "rc_verbs", 0); pair_table("lat", "ud_zv", "ud_verbs", 0); pair_table("lat", "uc_zv", "rc_verbs", 0)
    if (measured["openib"]) pair_table("lat", "rc_zv", "openib", 0)
    printf "== MPI bandwidth, MB/s: zv_osu, windows of %s MPI_Isend; higher is better; median [min-max]\n", meta["window"]
    pair_table("bw", "rc_zv", "rc_verbs", 1); pair_table("bw", "ud_zv", "ud_verbs", 1); pair_table("bw", "uc_zv", "rc_verbs", 1)
    if (measured["openib"]) pair_table("bw", "rc_zv", "openib", 1)
    if (("osu-lat", "rc_zv") in meas) {
        printf "== OSU osu_latency, usec, and osu_bw, MB/s (%s); median [min-max]\n", meta["osu"]
        print "   latency"
        pair_table("osu-lat", "rc_zv", "rc_verbs", 0); pair_table("osu-lat", "ud_zv", "ud_verbs", 0); pair_table("osu-lat", "uc_zv", "rc_verbs", 0)
        print "   bandwidth"
        pair_table("osu-bw", "rc_zv", "rc_verbs", 1); pair_table("osu-bw", "ud_zv", "ud_verbs", 1); pair_table("osu-bw", "uc_zv", "rc_verbs", 1)
    }
    if (measured["perftest"]) {
        print "== The raw verbs floor on the same device: perftest ib_send_lat (usec) and ib_write_bw (MB/s) beside rc_zv"
        print "   latency"; pair_table("lat", "rc_zv", "perftest", 0)
        print "   bandwidth"; pair_table("bw", "rc_zv", "perftest", 1)
    }

    head = "== The eager -> rendezvous switch (where <rndv> starts, `ucx_info -e -u t`), figures either side of it\n" \
           sprintf("%-9s %-26s %-20s %-20s %s", "peer", "test: switch at", "last eager", "first rendezvous", "step")
    for (i = 1; i <= npeer; ++i) {
        p = peer[i]
        for (k = 0; k < 2; ++k) {
            t = k ? "lat" : "bw"; th = k ? tnbr[p] : tsend[p]
            if (th !~ /^[0-9]+$/ || !has(t, p, th) || !has(t, p, th - 1)) continue
            x = med[t, p, th] / med[t, p, th - 1]
            if (cnt[t, p, th] < 3 || cnt[t, p, th - 1] < 3) sw = sprintf("x%.2f, not called: under 3 rounds", x)
            else if (hi[t, p, th] < lo[t, p, th - 1]) sw = k ? sprintf("faster, x%.2f", x) : sprintf("a dip, x%.2f", x)
            else if (lo[t, p, th] > hi[t, p, th - 1]) sw = k ? sprintf("a jump, x%.2f", x) : sprintf("a rise, x%.2f", x)
            else sw = sprintf("none beyond noise (x%.2f)", x)
            if (head != "") { print head; head = "" }
            printf "%-9s %-26s %-20s %-20s %s\n", p, (k ? "lat (MPI_Send): " : "bw (MPI_Isend): ") th " B", cell(t, p, th - 1), cell(t, p, th), sw
        }
    }
    if (head == "") print ""

    cs = meta["cache_sizes"]; gsub(/,/, " ", cs); ncs = split(cs, csz, " ")
    if (ncs && has("bw", "rc_zv", csz[1])) {
        print "== The registration cache: rc_zv bandwidth, MB/s, above its switch (rendezvous, zero-copy)"
        print "   reuse: the same buffers every time; fresh: a new malloc per message; off: the cache off"
        print "   (UCX_ZV_RCACHE_MONITOR=none), a registration per message"
        printf "%-9s %-22s %-22s %-22s %-30s %s\n", "size", "reuse", "fresh", "off", "reuse vs off", "reuse vs fresh"
        for (i = 1; i <= ncs; ++i) {
            s = csz[i]
            c1 = call("bw", "rc_zv", "bw-off", "rc_zv", s, 1, "reuse faster", "reuse slower"); w1 = verdict_word
            c2 = call("bw", "rc_zv", "bw-fresh", "rc_zv", s, 1, "reuse faster", "reuse slower")
            if (w1 != "") cache_word[s] = w1
            printf "%-9s %-22s %-22s %-22s %-30s %s\n", hsize(s), cell("bw", "rc_zv", s), cell("bw-fresh", "rc_zv", s), cell("bw-off", "rc_zv", s), c1, c2
        }
        print ""
    }

    first = 1
    for (p in na) {
        if (first) print "== Peers not run"; first = 0
        printf "   %-9s %s\n", p, na[p]
    }
    if (!first) print ""

    # ------------------------------------------------------------ verdict
    print "== Verdict"
    split("rc_zv ud_zv uc_zv", Z, " ")
    for (i = 1; i <= 3; ++i) {
        z = Z[i]
        if (z in na) { printf "- %s: not run: %s.\n", z, na[z]; continue }
        if (z in fails) printf "- %s FAILED: %s%s.\n", z, fails[z], (errs[z] && fails[z] ~ /;/) ? sprintf(" (%d corrupted message(s) in all)", errs[z]) : ""
        else if (errs[z] > 0) printf "- %s FAILED its validated transfers: %d message(s) arrived corrupted.\n", z, errs[z]
        if (!(z in fails) && errs[z] == 0 && measured[z]) passed = passed ", " z
    }
    for (p in fails) if (p !~ /^(rc|ud|uc)_zv$/) printf "- %s failed: %s.\n", p, fails[p]
    if (passed != "")
        printf "- Validated transfers passed: %s. Every byte of every message of %s of latency and bandwidth\n  was checked on receipt, and none arrived corrupted.\n", substr(passed, 3), plural(rounds, "round")
    if (nm) {
        print "- Instructions per message (exact counts; on a real HCA the software part of the latency),"
        print "  zv/peer; ahead or behind beyond 5 %, level within it:"
        split("rc_zv:rc_verbs ud_zv:ud_verbs uc_zv:rc_verbs", P, " ")
        for (i = 1; i <= 3; ++i) {
            split(P[i], a, ":"); z = a[1]; q = a[2]; shown = 0
            for (o = 0; o < 2; ++o) {
                wd["ahead"] = wd["level"] = wd["behind"] = ""
                for (j = 1; j <= nm; ++j) {
                    m = morder[j]
                    if (!((m, z) in ctot) || !((m, q) in ctot)) continue
                    x = o ? cown[m, z] : ctot[m, z]; y = o ? cown[m, q] : ctot[m, q]
                    if (y <= 0) continue
                    r = x / y; v = r < 0.95 ? "ahead" : r > 1.05 ? "behind" : "level"
                    # (*: a count that follows the timing, see below)
                    wd[v] = wd[v] ", " mname(m) ((m == "ucp_tag_1048576" && z != "rc_zv") ? "*" : "") " " sprintf("%.2f", r)
                }
                line = ""
                if (wd["ahead"] != "") line = line "; ahead in " substr(wd["ahead"], 3)
                if (wd["level"] != "") line = line "; level in " substr(wd["level"], 3)
                if (wd["behind"] != "") line = line "; behind in " substr(wd["behind"], 3)
                if (line == "") continue
                if (!shown++) printf "  %s against %s:\n", z, q
                printf "    %-9s %s\n", o ? "own code" : "in all", substr(line, 3)
            }
        }
        print "  (own code: the transport library alone, libuct_zv against libuct_ib, what a real HCA'"'"'s latency is"
        print "  mostly made of. uc_zv keeps its reliability in software, as ud does, and pays for it beside"
        print "  rc_verbs; its case is a lossy network without flow control, not speed.)"
        print "  *: over ud and uc_zv a 1 MiB message runs the software reliability, whose acks and resends follow"
        print "  the timing: that count moves with the host'"'"'s load, by up to a fifth, where the others move ~1 %."
    }
    print "- MPI timings (medians of " plural(rounds, "round") ", called only beyond the spread):"
    nt = split("lat:latency|bw:bandwidth|osu-lat:OSU osu_latency|osu-bw:OSU osu_bw", TT, "|")
    split("rc_zv:rc_verbs ud_zv:ud_verbs uc_zv:rc_verbs rc_zv:openib", P, " ")
    said = 0
    for (i = 1; i <= 4; ++i) {
        split(P[i], a, ":")
        if (!measured[a[1]] || !measured[a[2]]) continue
        for (k = 1; k <= nt; ++k) {
            split(TT[k], tt, ":"); x = words(tt[1], a[1], a[2])
            if (x != "") { printf "  %s against %s, %s: %s.\n", a[1], a[2], tt[2], x; ++said }
        }
    }
    if (!said) print "  none called: too few rounds."
    for (s in cache_word) {
        if (cache_word[s] == "ahead") printf "  The registration cache pays at %s: reused buffers beat a registration per message beyond the noise.\n", hsize(s)
        else if (cache_word[s] == "same") printf "  The registration cache: at %s reused buffers and a registration per message are the same within\n  this run'"'"'s noise.\n", hsize(s)
        else printf "  The registration cache: at %s reused buffers were slower than a registration per message.\n", hsize(s)
    }
    if (vm) {
        print "- What the emulator cannot show: the speed of a real HCA. rxe is a software device: its provider"
        print "  and the kernel do the work a NIC does, the emulated CPUs run 10-25x slower than the host and"
        print "  share it with whatever else runs there, so only ratios measured side by side mean anything, and"
        print "  a spread is the host'"'"'s noise. Nor loss (contrib/bench/wire-bench.sh), nor scale"
        print "  (contrib/bench/ep-cost.sh)." (nm ? " The instruction counts above are what carries over." : "")
    } else {
        printf "- Measured on %s, a real RDMA device: the %s sweep (%d sizes), %s, the same medians and spreads.\n", dev, meta["sweep"], nsize, plural(rounds, "round")
    }
    if (("busy_start" in host) && ("cpus" in host))
        printf "- When the job started, other work kept %s of the host'"'"'s %s CPUs busy%s\n", host["busy_start"], host["cpus"],
               (host["busy_start"] + 0 >= 0.25) ? ": it shared them with the job, which widens the spreads and leaves fewer ratios called." : " (quiet)."
    exit
}
function plural(n, w) { return n " " w (n == 1 ? "" : "s") }
function mname(m) {
    if (m == "uct_am_short_8") return "am_short"
    if (m == "uct_am_bcopy_512") return "am_bcopy"
    if (m == "ucp_tag_4096") return "tag 4 KiB"
    if (m == "ucp_tag_1048576") return "tag 1 MiB"
    return m
}' "$out"
