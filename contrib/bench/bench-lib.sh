# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# Helpers shared by rel-bench.sh and wire-bench.sh (sourced).

# pt_column COL FILE: one column of ucx_perftest's final line (-f): 3 =
# median latency, 7 = overall MB/s; "nan" when the run printed none.
pt_column() {
    awk -v c="$1" '$1 ~ /^[0-9]+$/ && NF >= 8 {v = $(c - 1)} END {print (v == "" ? "nan" : v)}' "$2"
}
# median: of the numbers on stdin (space separated).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "nan")}'; }
# ratio A B: A / B with two decimals, n/a unless both are positive.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
