#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Main-job body (after the build): the MPI benchmark driver with a short
# sweep, 1 B..1 MiB, one round, peers interleaved, data validated on every
# receive; tables of figures and ratios on stdout, data and PNG plots in
# $ZV_BUILDDIR/mpi-bench; then the rendezvous patterns beside rc_verbs and
# the raw floor (contrib/bench/rndv-bench.sh). Each goes into the Soft-RoCE VM by itself
# when this host has no active RDMA port.
# usage: ZV_BUILDDIR=B contrib/main-job.sh
# Environment: ZV_MAIN_FULL=1 (1 B..4 MiB, 3 rounds, medians), ZV_MAIN_MAX,
# ZV_MAIN_ITERS (largest size, iterations), ZV_MAIN_TIMEOUT (VM, seconds).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
b=${ZV_BUILDDIR:?}
args=()
[ "${ZV_MAIN_FULL:-0}" != 1 ] || args+=(--full)
[ -z "${ZV_MAIN_MAX:-}" ] || export ZV_BENCH_MAX=$ZV_MAIN_MAX
[ -z "${ZV_MAIN_ITERS:-}" ] || export ZV_BENCH_ITERS=$ZV_MAIN_ITERS
export ZV_BENCH_TIMEOUT=${ZV_MAIN_TIMEOUT:-3000}
status=0
"$repo/contrib/bench/mpi-bench.sh" "${args[@]}" "$b" || status=$?
out=${ZV_BENCH_OUT:-$b/mpi-bench}
# rendezvous beside rc_verbs in four patterns, quiet and busy (its VM, or
# this host's device); figures only, it has no pass/fail
echo
"$repo/contrib/bench/rndv-bench.sh" "$b" 2>/dev/null || echo "main job: rndv-bench failed (status $?)"
echo
echo "main job: tables in $out/table.txt, plots: $(cd "$out" && ls *.png 2>/dev/null | tr '\n' ' ')(in $out)"
exit $status
