#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Tables of an mpi-bench.sh run: latency and bandwidth of every peer with
# ratios, the eager->rendezvous switch, the registration cache's benefit,
# and the targets met or not.
# usage: contrib/bench/mpi-report.sh OUT_DIR   (files written by mpi-bench.sh:
#        lat.dat bw.dat cache.dat switch.dat na.txt peers.txt)
set -eu
out=${1:?usage: mpi-report.sh OUT_DIR}
# zv transport / peer pairs that get a ratio column, when both were measured
pairs="rc_zv/rc_verbs rc_zv/openib rc_zv/perftest ud_zv/ud_verbs uc_zv/rc_verbs"

awk -v pairs="$pairs" -v outdir="$out" '
function num(x) { return x ~ /^[0-9.]+$/ && x + 0 > 0 }
function rat(a, b) { return (num(a) && num(b)) ? sprintf("%.2f", a / b) : "-" }
function load(file, tag,    line, n, i, f) {
    n = 0
    while ((getline line < file) > 0) {
        split(line, f, " ")
        if (f[1] == "size") { for (i = 2; f[i] != ""; ++i) hdr[tag, i - 1] = f[i]; ncol[tag] = i - 2; continue }
        sizes[tag, ++n] = f[1]
        for (i = 2; i <= ncol[tag] + 1; ++i) val[tag, f[1], hdr[tag, i - 1]] = f[i]
    }
    nsize[tag] = n
    close(file)
}
function show(tag, title, unit,    i, j, s, p, k, np, pr, a, c, line) {
    printf "\n== %s\n", title
    line = sprintf("%9s", "size")
    for (j = 1; j <= ncol[tag]; ++j) {
        p = hdr[tag, j]; used[p] = 0
        line = line sprintf(" %9s", (p in na) ? p "*" : p)
    }
    np = split(pairs, pr, " "); npr = 0
    for (k = 1; k <= np; ++k) {
        split(pr[k], a, "/")
        if (!(a[1] in na) && !(a[2] in na) && ((tag, sizes[tag, 1], a[1]) in val) && ((tag, sizes[tag, 1], a[2]) in val)) {
            rp[++npr] = pr[k]; line = line sprintf(" %14s", pr[k])
        }
    }
    print line
    for (i = 1; i <= nsize[tag]; ++i) {
        s = sizes[tag, i]
        line = sprintf("%9s", s)
        for (j = 1; j <= ncol[tag]; ++j) {
            p = hdr[tag, j]; c = val[tag, s, p]
            line = line sprintf(" %9s", (p in na) ? "n/a" : c)
        }
        for (k = 1; k <= npr; ++k) {
            split(rp[k], a, "/")
            line = line sprintf(" %14s", rat(val[tag, s, a[1]], val[tag, s, a[2]]))
        }
        print line
    }
    print unit
}
# target: zv column better or equal than peer at every size
function target(tag, z, p, lower_better,    i, s, a, b, bad, n) {
    if ((z in na) || (p in na) || !((tag, sizes[tag, 1], z) in val) || !((tag, sizes[tag, 1], p) in val)) {
        return "n/a (" ((z in na) ? z ": " na[z] : (p in na) ? p ": " na[p] : "not measured") ")"
    }
    bad = ""; n = 0
    for (i = 1; i <= nsize[tag]; ++i) {
        s = sizes[tag, i]; a = val[tag, s, z]; b = val[tag, s, p]
        if (!num(a) || !num(b)) continue
        ++n
        if (lower_better ? a > b : a < b) bad = bad " " s
    }
    if (n == 0) return "n/a (no common sizes)"
    return bad == "" ? "met at all " n " sizes" : "NOT met at" bad
}
BEGIN {
    while ((getline line < (outdir "/na.txt")) > 0) {
        p = line; sub(/ .*/, "", p); r = line; sub(/^[^ ]* /, "", r); na[p] = r
    }
    load(outdir "/lat.dat", "lat"); load(outdir "/bw.dat", "bw")
    have_cache = (getline line < (outdir "/cache.dat")) > 0; close(outdir "/cache.dat")
    if (have_cache) load(outdir "/cache.dat", "cache")
    while ((getline line < (outdir "/switch.dat")) > 0) { split(line, f, " "); sw[f[1]] = f[2]; swl[f[1]] = f[3] }

    show("lat", "MPI latency, usec (half round trip, 2 ranks; lower is better; ratio < 1 favours zv)",
         "(perftest = ib_send_lat t_avg, the raw verbs floor)")
    show("bw", "MPI bandwidth, MB/s (window of 16 messages; higher is better; ratio > 1 favours zv)",
         "(perftest = ib_write_bw BW average, MiB/s converted to MB/s)")
    first = 1
    for (p in na) { if (first) print "\nnot measured (*):"; first = 0; printf "  %-9s n/a: %s\n", p, na[p] }

    print "\n== eager -> rendezvous switch (where <rndv> starts in `ucx_info -e -u t`: tag_send for"
    print "   MPI_Isend, the bw test; tag_send_nbr for blocking MPI_Send, the lat test), figures either side"
    printf "%-9s %9s %9s %9s %8s | %9s %9s %9s %8s\n", "peer", "bw thresh", "MB/s <", "MB/s >=", ">= / <",
           "lat thr", "usec <", "usec >=", ">= / <"
    for (p in sw) {
        line = sprintf("%-9s", p)
        for (k = 0; k < 2; ++k) {
            tag = k ? "lat" : "bw"; t = k ? swl[p] : sw[p]; lo = ""; hi = ""
            for (i = 1; i <= nsize[tag]; ++i) {
                s = sizes[tag, i]
                if (s + 0 < t + 0) lo = s; else if (hi == "") hi = s
            }
            if (t !~ /^[0-9]+$/ || lo == "" || hi == "") {
                line = line sprintf(" %9s %9s %9s %8s", t, "-", "-", "outside")
            } else {
                r = rat(val[tag, hi, p], val[tag, lo, p]); if (!k) dip[p] = r
                line = line sprintf(" %9s %9s %9s %8s", t, val[tag, lo, p], val[tag, hi, p], r)
            }
            if (!k) line = line " |"
        }
        print line
    }
    print "(bandwidth: >= / < below 1 is a dip at the switch; latency: above 2 is a jump beyond the size doubling)"

    if (have_cache) {
        print "\n== registration cache: bandwidth MB/s with the same buffers (reuse), a fresh malloc per"
        print "   iteration (fresh, -F) and the cache off (off: UCX_ZV_RCACHE_MONITOR=none, a registration per message)"
        line = sprintf("%9s", "size")
        for (j = 1; j <= ncol["cache"]; ++j) line = line sprintf(" %12s", hdr["cache", j])
        for (j = 1; j <= ncol["cache"]; ++j) if (hdr["cache", j] ~ /\.reuse$/) {
            z = hdr["cache", j]; sub(/\.reuse$/, "", z); line = line sprintf(" %16s %16s", z " reuse/off", z " reuse/fresh")
        }
        print line
        for (i = 1; i <= nsize["cache"]; ++i) {
            s = sizes["cache", i]; if (val["cache", s, hdr["cache", 1]] == "-") continue
            line = sprintf("%9s", s)
            for (j = 1; j <= ncol["cache"]; ++j) line = line sprintf(" %12s", val["cache", s, hdr["cache", j]])
            for (j = 1; j <= ncol["cache"]; ++j) if (hdr["cache", j] ~ /\.reuse$/) {
                z = hdr["cache", j]; sub(/\.reuse$/, "", z)
                line = line sprintf(" %16s %16s", rat(val["cache", s, z ".reuse"], val["cache", s, z ".off"]),
                                    rat(val["cache", s, z ".reuse"], val["cache", s, z ".fresh"]))
            }
            print line
        }
    }

    print "\n== targets (issue 7; one run, emulated device: ratios only)"
    printf "  rc_zv latency   <= rc_verbs: %s\n", target("lat", "rc_zv", "rc_verbs", 1)
    printf "  rc_zv bandwidth >= rc_verbs: %s\n", target("bw", "rc_zv", "rc_verbs", 0)
    printf "  rc_zv latency   <= openib:   %s\n", target("lat", "rc_zv", "openib", 1)
    printf "  rc_zv bandwidth >= openib:   %s\n", target("bw", "rc_zv", "openib", 0)
    if (("rc_zv" in dip) && ("rc_verbs" in dip))
        printf "  switch dip rc_zv (%s) no deeper than rc_verbs (%s): %s\n", dip["rc_zv"], dip["rc_verbs"],
               (dip["rc_zv"] + 0 >= dip["rc_verbs"] + 0) ? "met" : "NOT met"
    else
        print "  switch dip: n/a (a threshold outside the sweep or not found)"
    s = 1048576
    if (have_cache && ((("cache", s, "rc_zv.reuse") in val))) {
        r = rat(val["cache", s, "rc_zv.reuse"], val["cache", s, "rc_zv.off"])
        printf "  rc_zv reused-buffer bw >= 3x registration per message at 1 MiB: %s (%s)\n",
               (r != "-" && r + 0 >= 3) ? "met" : "NOT met", r
    } else print "  rc_zv reused-buffer bw >= 3x registration per message at 1 MiB: n/a (1 MiB not measured)"
}'
