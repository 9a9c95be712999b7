#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and run the MPI benchmark driver
# (contrib/bench/mpi-bench.sh, a short sweep) on an RDMA device - this
# host's if it has an active port, else the built-in Soft-RoCE VM. It prints
# tables of MPI latency and bandwidth over each zv transport beside UCX's
# rc_verbs/ud_verbs, Open MPI's openib BTL and raw perftest, measured in one
# run with the ratios, and draws PNG plots (contrib/main-job.sh).
# usage: contrib/main.sh   (ZV_MAIN_FULL=1: the full sweep, 1 B..4 MiB, 3 rounds)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export ZV_BUILDDIR=${ZV_BUILDDIR:-$repo/build}
"$repo/contrib/build.sh"
exec "$repo/contrib/main-job.sh"
