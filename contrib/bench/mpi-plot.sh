#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# PNG plots of an mpi-bench.sh run (gnuplot):
#   latency.png, bandwidth.png: every measured peer against message size,
#     log-log, the median of the rounds with a min-max error bar on every
#     point; each eager->rendezvous switch a dashed line, labelled on a row
#     of its own (peers with the same switch share one label);
#   cache.png: rc_zv's bandwidth above its switch with reused buffers, a
#     fresh buffer per message and the cache off, bars with min-max;
#   instructions.png (when OUT_DIR/cost.dat exists, msg-cost.sh --short):
#     instructions per message as bars, one panel per measure, each bar
#     split by object (the transport's own code, UCX, verbs and provider,
#     other).
# usage: contrib/bench/mpi-plot.sh OUT_DIR
set -eu
out=${1:?usage: mpi-plot.sh OUT_DIR}
command -v gnuplot > /dev/null || { echo "mpi-plot: gnuplot not installed (contrib/setup.sh)" >&2; exit 1; }
term="pngcairo size 1100,680 noenhanced font ',10'"
gnuplot -e "set terminal $term" > /dev/null 2>&1 < /dev/null || term="png size 1100,680 noenhanced"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
where=$(awk '$1 == "where" {print $2}' "$out/meta.txt" 2>/dev/null || true)
rounds=$(awk '$1 == "rounds" {print $2}' "$out/meta.txt" 2>/dev/null || true)
dev=$(awk '$1 == "device" {print $2}' "$out/meta.txt" 2>/dev/null || true)
window=$(awk '$1 == "window" {print $2}' "$out/meta.txt" 2>/dev/null || true)
note="median of ${rounds:-?} rounds, bars: min-max; $dev"
[ "$where" != vm ] || note="$note, Soft-RoCE VM: compare peers, not absolute figures"

# curves TEST: one data file per peer (size median min max) and the plot
# command for them, in the peers' order
curves() {
    local t=$1 p sep=""
    for p in rc_zv rc_verbs ud_zv ud_verbs uc_zv openib perftest; do
        awk -v t="$t" -v p="$p" '$1 == t && $2 == p {print $3, $4, $5, $6}' "$out/stats.dat" > "$tmp/$t.$p"
        [ -s "$tmp/$t.$p" ] || continue
        printf '%s"%s" using 1:2:3:4 with yerrorlines pointsize 0.8 title "%s"' "$sep" "$tmp/$t.$p" "$p"
        sep=", "
    done
}
# switches COLUMN: a dashed line at each distinct switch of switch.dat
# (2: MPI_Isend, the bw test; 3: MPI_Send, the lat test), and its label
# naming the peers that switch there: each label on a row of its own near
# the bottom, ending at its line (the curves are high on the right)
switches() {
    [ -s "$out/switch.dat" ] || return 0
    awk -v c="$1" '$c ~ /^[0-9]+$/ { k = $c + 0; if (!(k in at)) { at[k] = $1; v[++n] = k } else at[k] = at[k] ", " $1 }
        END { for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
              for (i = 1; i <= n; ++i) {
                  printf "set arrow from %d, graph 0 to %d, graph 1 nohead dashtype 2 lc rgb \"gray40\"\n", v[i], v[i]
                  printf "set label \"%s: rendezvous from %d B\" at %d, graph %.2f right offset -0.5,0 font \",8\" front\n",
                         at[v[i]], v[i], v[i], 0.04 + 0.05 * (n - i)
              } }' "$out/switch.dat"
}
draw() { # TEST PNG TITLE YLABEL [extra gnuplot]
    local t=$1 png=$2 title=$3 ylabel=$4 extra=${5:-} p
    p=$(curves "$t")
    [ -n "$p" ] || return 0
    gnuplot <<EOF
set terminal $term
set output "$png"
set title "$title\n($note)"
set xlabel "message size (bytes)"
set ylabel "$ylabel"
set logscale x 2
set logscale y 10
set format y "%g"
set offsets graph 0.03, graph 0.03, 0, 0
set xtics ("1 B" 1, "4 B" 4, "16 B" 16, "64 B" 64, "256 B" 256, "1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, \
           "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304)
set grid
set key outside right
$extra
$(switches "$([ "$t" = lat ] && echo 3 || echo 2)")
plot $p
EOF
    echo "mpi-plot: $png"
}
if [ -s "$out/stats.dat" ]; then
    draw lat "$out/latency.png" "MPI latency (zv_osu ping-pong, half round trip; lower is better)" "latency, usec"
    draw bw "$out/bandwidth.png" "MPI bandwidth (zv_osu, windows of ${window:-?} MPI_Isend; higher is better)" "bandwidth, MB/s"
    # the cache: bars with min-max at each size above rc_zv's switch
    awk '$2 == "rc_zv" && ($1 == "bw-fresh" || $1 == "bw-off") {print $3}' "$out/stats.dat" | sort -n -u > "$tmp/cs"
    if [ -s "$tmp/cs" ]; then
        while read -r s; do
            for t in bw bw-fresh bw-off; do
                awk -v t="$t" -v s="$s" '$1 == t && $2 == "rc_zv" && $3 == s {v = $4 " " $5 " " $6} END {print (v == "" ? "NaN NaN NaN" : v)}' "$out/stats.dat"
            done | paste -sd' ' - | sed "s/^/$s /"
        done < "$tmp/cs" | awk '{ s = $1; l = (s >= 1048576 ? s / 1048576 " MiB" : s >= 1024 ? s / 1024 " KiB" : s " B"); $1 = "\"" l "\""; print }' > "$tmp/cache"
        # cache_plot: a bar series for each of reuse, fresh, off that was measured
        cache_plot() {
            awk 'BEGIN { split("reused buffers|fresh malloc per message|cache off (a registration per message)", t, "|") }
                 { for (i = 0; i < 3; ++i) if ($(2 + 3 * i) != "NaN") have[i] = 1 }
                 END { sep = "plot "
                       for (i = 0; i < 3; ++i) if (have[i]) {
                           printf "%s\"%s\" using %d:%d:%d%s title \"%s\"", sep, f, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i,
                                  sep == "plot " ? ":xtic(1)" : "", t[i + 1]; sep = ", " }
                       print "" }' f="$tmp/cache" "$tmp/cache"
        }
        gnuplot <<EOF
set terminal $term
set output "$out/cache.png"
set title "Registration cache: rc_zv bandwidth above its rendezvous switch\n($note)"
set ylabel "bandwidth, MB/s"
set xlabel "message size"
set style data histograms
set style histogram errorbars gap 2 lw 1
set style fill solid 0.6 border -1
set yrange [0:*]
set grid ytics
set key top right
$(cache_plot)
EOF
        echo "mpi-plot: $out/cache.png"
    fi
fi

# instruction counts: a panel per measure (UCP 1 MiB in two: rc's rendezvous
# is thousands of instructions, ud's bcopy pipeline and uc_zv's packet per
# MTU millions), a bar per transport split by object, its total above it
if [ -s "$out/cost.dat" ]; then
    panels=""
    i=0
    for m in uct_am_short_8 uct_am_bcopy_512 ucp_tag_4096 ucp_tag_1048576:rc ucp_tag_1048576:ud; do
        case $m in *:rc) tls="rc_verbs rc_zv" ;; *:ud) tls="uc_zv ud_verbs ud_zv" ;; *) tls="rc_verbs rc_zv uc_zv ud_verbs ud_zv" ;; esac
        f=$tmp/c.${m/:/.}
        awk -v m="${m%:*}" -v tls="$tls" '$1 == m { v[$2] = $4 " " $5 " " $6 " " $7 }
            END { n = split(tls, T, " "); for (i = 1; i <= n; ++i) if (T[i] in v) print T[i], v[T[i]] }' "$out/cost.dat" > "$f"
        [ -s "$f" ] || continue
        case $m in
        uct_am_short_8) title="UCT am_short 8 B" ;; uct_am_bcopy_512) title="UCT am_bcopy 512 B" ;;
        ucp_tag_4096) title="UCP tag 4 KiB (eager)" ;; *:rc) title="UCP tag 1 MiB, rc (rendezvous)" ;;
        *) title="UCP tag 1 MiB, uc_zv and ud (moves with the load)" ;;
        esac
        panels+="set title \"$title\"
plot \"$f\" using 2:xtic(1) title \"own code (libuct_zv / libuct_ib)\" lc rgb \"#c0392b\", \\
     \"\" using 3 title \"UCP, UCS, UCT base\" lc rgb \"#2e86c1\", \\
     \"\" using 4 title \"libibverbs + provider\" lc rgb \"#7f8c8d\", \\
     \"\" using 5 title \"libc, benchmark\" lc rgb \"#d4ac0d\", \\
     \"\" using 0:(\$2+\$3+\$4+\$5):(sprintf(\"%d\", \$2+\$3+\$4+\$5)) with labels offset 0,0.7 font \",8\" notitle
"
        i=$((i + 1))
    done
    if [ -n "$panels" ]; then
        gnuplot <<EOF
set terminal ${term/size 1100,680/size 1800,560}
set output "$out/instructions.png"
set multiplot layout 1,$((i + 1)) title "Instructions per message (callgrind, $dev): exact counts, neither the emulator's speed nor the host's load moves them (but ud's and uc_zv's 1 MiB)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set format y "%.1s%c"
set grid ytics
set xtics rotate by -30 font ',9'
set ylabel "instructions per message"
unset key
$panels
# the last panel: the key alone
unset border; unset tics; unset ylabel; unset title; unset grid; set yrange [0:1]
set key center center vertical Left reverse font ',10' spacing 1.5
plot NaN with boxes title "own code (libuct_zv / libuct_ib)" lc rgb "#c0392b", \
     NaN with boxes title "UCP, UCS, UCT base" lc rgb "#2e86c1", \
     NaN with boxes title "libibverbs + provider" lc rgb "#7f8c8d", \
     NaN with boxes title "libc, benchmark" lc rgb "#d4ac0d"
unset multiplot
EOF
        echo "mpi-plot: $out/instructions.png"
    fi
fi
