#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and run zverbs on an RDMA device - this
# host's if it has an active port, else the built-in Soft-RoCE VM.
# It prints one table: MPI latency and bandwidth over rc_zv beside UCX's
# rc_verbs on the same device in the same run (contrib/main-job.sh).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export ZV_BUILDDIR=${ZV_BUILDDIR:-$repo/build}
"$repo/contrib/build.sh"
ucx_src=$(sed -n 's/^UCX_SRC = //p' "$ZV_BUILDDIR/Makefile")
exec "$repo/contrib/vm/run.sh" --timeout "${ZV_MAIN_TIMEOUT:-1800}" --cpus 2 \
    --share "$repo" --share "$ZV_BUILDDIR" ${ucx_src:+--share "$ucx_src"} \
    -e ZV_BUILDDIR="$ZV_BUILDDIR" -- \
    "$repo/contrib/main-job.sh"
