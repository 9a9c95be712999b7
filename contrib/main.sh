#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and run zverbs on an RDMA device - this
# host's if it has an active port, else the built-in Soft-RoCE VM.
# Until the rc_zv data path lands (issue 4) it shows the plumbing: the
# device's ports as zv reports them beside UCX's own ib transports, and
# the Open MPI component bringing zv into MPI ranks without LD_PRELOAD.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export ZV_BUILDDIR=${ZV_BUILDDIR:-$repo/build}
"$repo/contrib/build.sh"
exec "$repo/contrib/vm/run.sh" --timeout "${ZV_MAIN_TIMEOUT:-900}" \
    --share "$repo" --share "$ZV_BUILDDIR" -e ZV_BUILDDIR="$ZV_BUILDDIR" -- \
    "$repo/contrib/main-job.sh"
