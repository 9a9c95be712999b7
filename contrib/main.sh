#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, then (contrib/main-job.sh) on an RDMA device
# - this host's if it has an active port, else the built-in Soft-RoCE VM -
# the instructions per message of each zv transport beside UCX's (the
# headline: exact counts, split by object), then MPI latency and bandwidth
# over each zv transport beside UCX's rc_verbs/ud_verbs and raw perftest, 5
# rounds with the peers interleaved, every byte checked; medians with their
# spread, a verdict in words, and PNG plots in build/mpi-bench.
# usage: contrib/main.sh   (ZV_MAIN_FULL=1: the full sweep, 1 B..4 MiB, in
# the VM too; a real device has it by default)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export ZV_BUILDDIR=${ZV_BUILDDIR:-$repo/build}
start=$(date +%s)
"$repo/contrib/build.sh"
export ZV_MAIN_BUILD_SECONDS=$(( $(date +%s) - start ))   # main-job.sh reports it
exec "$repo/contrib/main-job.sh"
