#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# PNG plots of an mpi-bench.sh run (gnuplot): latency.png and bandwidth.png
# (every measured peer vs message size, log-log, the eager->rendezvous
# switch of each pml ucx column marked by a dashed vertical line) and
# cache.png (bandwidth with reused buffers, fresh buffers, cache off).
# usage: contrib/bench/mpi-plot.sh OUT_DIR
set -eu
out=${1:?usage: mpi-plot.sh OUT_DIR}
command -v gnuplot > /dev/null || { echo "mpi-plot: gnuplot not installed (contrib/setup.sh)" >&2; exit 1; }
term="pngcairo size 1000,640 noenhanced font ',10'"
gnuplot -e "set terminal $term" > /dev/null 2>&1 < /dev/null || term="png size 1000,640 noenhanced"

# plot commands for every column of a .dat file (columns that are all "-"
# are skipped: not measured)
plots() { # FILE
    awk 'NR == 1 { for (i = 2; i <= NF; ++i) name[i] = $i; n = NF; next }
         { for (i = 2; i <= n; ++i) if ($i != "-") have[i] = 1 }
         END { sep = ""
               for (i = 2; i <= n; ++i) if (have[i]) {
                   printf "%s\"%s\" using 1:%d with linespoints title \"%s\"", sep, FILENAME, i, name[i]; sep = ", " }
         }' "$1"
}
# dashed lines at each switch, labelled
marks() { # COLUMN of switch.dat: 2 = MPI_Isend (bw), 3 = MPI_Send (lat)
    [ -s "$out/switch.dat" ] || return 0
    local top; top=$(awk 'END {print $1}' "$out/lat.dat")
    awk -v c="$1" -v top="$top" '$c ~ /^[0-9]+$/ && $c + 0 <= top + 0 { $2 = $c; printf "set arrow from %s, graph 0 to %s, graph 1 nohead dashtype 2 lc rgb \"gray40\"\n", $2, $2
           printf "set label \"%s rndv %s B\" at %s, graph %.2f rotate by 90 offset %d,0 font \",8\"\n", $1, $2, $2, 0.6 - 0.1 * (NR - 1), (NR % 2) ? -1 : 1 }' \
        "$out/switch.dat"
}
draw() { # DAT PNG TITLE YLABEL [extra gnuplot]
    local dat=$1 png=$2 title=$3 ylabel=$4 extra=${5:-} p
    [ -s "$dat" ] || return 0
    p=$(plots "$dat")
    [ -n "$p" ] || return 0
    gnuplot <<EOF
set terminal $term
set output "$png"
set title "$title"
set xlabel "message size (bytes)"
set ylabel "$ylabel"
set logscale xy 2
set format x "%.0b %BB"
set grid
set key outside right
set datafile missing "-"
$extra
plot $p
EOF
    echo "mpi-plot: $png"
}
draw "$out/lat.dat" "$out/latency.png" "MPI latency (zv_osu, 2 ranks, one run; Soft-RoCE: compare ratios only)" \
     "latency, usec (half round trip)" "$(marks 3)"
draw "$out/bw.dat" "$out/bandwidth.png" "MPI bandwidth (zv_osu, window 16, one run; Soft-RoCE: compare ratios only)" \
     "bandwidth, MB/s" "$(marks 2)
set key bottom right inside"
draw "$out/cache.dat" "$out/cache.png" "Registration cache: reused vs fresh buffers vs cache off" \
     "bandwidth, MB/s" "set key bottom right inside"
