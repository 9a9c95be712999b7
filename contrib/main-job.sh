#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Main-job body (after the build), on this host's RDMA device or, without
# one, in the Soft-RoCE VM (one boot for all of it):
#   1. the headline, noise-free: instructions per message of each zv
#      transport beside the UCX transport it stands beside, split by object
#      (contrib/bench/msg-cost.sh --short);
#   2. MPI latency and bandwidth over every peer that can run here, 5
#      rounds, peers interleaved, every byte checked; medians with their
#      min-max spread, a ratio called only beyond the spread
#      (contrib/bench/mpi-bench.sh: 8 B, 4 KiB, 64 KiB, 1 MiB and each side
#      of the rendezvous switch in the VM; on a real device every power of
#      2 from 1 B to 4 MiB);
#   3. the verdict in words; data, tables and PNG plots in
#      $ZV_BUILDDIR/mpi-bench.
# It prints an estimate when it starts and its progress as it goes.
# usage: ZV_BUILDDIR=B contrib/main-job.sh
# Environment: ZV_MAIN_FULL=1 (the full sweep in the VM too; 0: the short
# one on a real device), ZV_MAIN_ROUNDS (default 5), ZV_MAIN_TIMEOUT (VM,
# seconds, default 3000), ZV_BENCH_OUT (default $ZV_BUILDDIR/mpi-bench).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
b=${ZV_BUILDDIR:?}
b=$(cd "$b" && pwd)
out=${ZV_BENCH_OUT:-$b/mpi-bench}
rounds=${ZV_MAIN_ROUNDS:-5}
export ZV_MAIN_T0=${ZV_MAIN_T0:-$(date +%s)}
clock() { local s=$(( $(date +%s) - ZV_MAIN_T0 )); printf '%d:%02d' $((s / 60)) $((s % 60)); }

if [ "${1:-}" = --on-device ]; then
    # ---- on the device (this host's, or inside the VM)
    echo "[$(clock)] instructions per message: 5 transports, 4 measures each, under callgrind" >&2
    ZV_BENCH_OUT=$out "$repo/contrib/bench/msg-cost.sh" --short "$b" ||
        echo "main job: the instruction counts failed (status $?)"
    echo "[$(clock)] instructions done" >&2
    ZV_BENCH_ON_DEVICE=1 ZV_BENCH_OUT=$out ZV_BENCH_ROUNDS=$rounds "$repo/contrib/bench/mpi-bench.sh" "$b"
    exit
fi

mkdir -p "$out"; out=$(cd "$out" && pwd)
rm -rf "$out"/raw "$out"/*.dat "$out"/*.png "$out"/*.txt
if ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
    where=device full=${ZV_MAIN_FULL:-1}
    dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
    # a real device: seconds, not minutes, per MPI run
    est_cost=120 est_run=4 est_boot=0
else
    where=vm full=${ZV_MAIN_FULL:-0}
    dev="the Soft-RoCE VM (rxe0)"
    # measured on this 2-core host, quiet: boot and thresholds ~30 s, the
    # instruction counts ~2.5 min, an MPI run ~8 s, a perftest pair ~1.5 s
    est_cost=150 est_run=8 est_boot=30
fi
if [ "$full" = 1 ]; then nsizes=23; else nsizes=4; fi
# the OSU micro-benchmarks (OSU_DIR, or osu_latency on PATH), if any
if [ -z "${OSU_DIR:-}" ] && command -v osu_latency > /dev/null; then
    OSU_DIR=$(dirname "$(readlink -f "$(command -v osu_latency)")")
fi
runs=6   # rc_zv (+ its cache-off run), rc_verbs, ud_zv, ud_verbs, uc_zv
[ -z "${OSU_DIR:-}" ] || runs=16   # + osu_latency, osu_bw each
est=$(( est_boot + est_cost + rounds * (runs * est_run * (full ? 3 : 1) + 2 * (full ? 2 * nsizes : 2)) + 15 ))
read -r l1 l5 _ < /proc/loadavg
cpus=$(nproc)
# Other work on the host now: the CPUs it keeps busy over one second (the
# load average would still count the build that just ran). The VM's two
# emulated CPUs then get what is left: about cpus / (cpus - busy) times
# as long.
busy_cpus() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6; exit }' /proc/stat; }
read -r u0 i0 <<< "$(busy_cpus)"; sleep 1; read -r u1 i1 <<< "$(busy_cpus)"
others=$(awk -v u=$((u1 - u0)) -v i=$((i1 - i0)) -v c="$cpus" 'BEGIN { t = u + i; printf "%.2f", (t > 0) ? c * u / t : 0 }')
slow=$(awk -v b="$others" -v c="$cpus" -v e="$est" 'BEGIN {
    if (b >= 0.25) { f = c - b; if (f < 0.5) f = 0.5; printf "%d", (e * c / f + 59) / 60 } }')
echo "main job: on $dev, $([ "$full" = 1 ] && echo "the full sweep (1 B..4 MiB)" || echo "the short sweep (8 B, 4 KiB, 64 KiB, 1 MiB and the rendezvous switch)"), $rounds rounds."
more=; [ -z "$slow" ] || more="; with $others of the $cpus CPUs busy with other work now, more like $slow min"
echo "main job: expect about $(( (est + 59) / 60 )) min on a quiet $cpus-core host$more."
echo "main job: first the instruction counts (the headline), then the MPI rounds, then tables, plots and the verdict."
{ echo "load_start $l1 $l5"; echo "busy_start $others"; echo "cpus $cpus"; } > "$out/host.txt"

status=0
vars=(ZV_MAIN_T0="$ZV_MAIN_T0" ZV_BENCH_FULL="$full" ZV_BENCH_OUT="$out" ZV_MAIN_ROUNDS="$rounds"
      ${OSU_DIR:+OSU_DIR="$OSU_DIR"})
if [ $where = device ]; then
    env "${vars[@]}" "$0" --on-device || status=$?
else
    args=(--timeout "${ZV_MAIN_TIMEOUT:-3000}" --cpus 2 --mem 4G --share "$repo" --share "$b")
    case $out/ in "$b"/*|"$repo"/*) ;; *) args+=(--share "$out") ;; esac
    [ -z "${OSU_DIR:-}" ] || args+=(--share "$OSU_DIR")
    for v in "${vars[@]}"; do args+=(-e "$v"); done
    "$repo/contrib/vm/run.sh" "${args[@]}" -- "$0" --on-device || status=$?
fi
echo "[$(clock)] measured; tables and plots" >&2
if [ -s "$out/meta.txt" ]; then
    ZV_BENCH_TABLES=1 ZV_BENCH_OUT=$out "$repo/contrib/bench/mpi-bench.sh" "$b" || status=1
    "$repo/contrib/bench/mpi-plot.sh" "$out" > /dev/null || echo "main job: plotting failed" >&2
else
    echo "main job: no MPI figures (status $status)"
    status=1
fi
[ ! -s "$out/cost.dat" ] || {
    # table.txt: the headline first, as the screen showed it
    "$repo/contrib/bench/cost-report.sh" "$out/cost.dat" "$(awk '$1 == "device" {print $2}' "$out/meta.txt" 2>/dev/null)" |
        cat - "$out/table.txt" > "$out/table.tmp" && mv "$out/table.tmp" "$out/table.txt"; }
echo
took="main job: done in $(clock)"
[ -z "${ZV_MAIN_BUILD_SECONDS:-}" ] ||
    took="$took, after $((ZV_MAIN_BUILD_SECONDS / 60)) min $((ZV_MAIN_BUILD_SECONDS % 60)) s of setup and build"
echo "$took; tables in $out/table.txt, plots $(find "$out" -maxdepth 1 -name '*.png' -printf '%f\n' | sort | tr '\n' ' ')in $out"
exit $status
