#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: set up, build, then run both tiers - the unit tier
# natively (make check) and the device tier in the Soft-RoCE VM, or on this
# host when it has an active RDMA port (make check-device).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${ZV_BUILDDIR:-$repo/build}
export ZV_BUILDDIR=$build
start=$(date +%s)

"$repo/contrib/build.sh"

status=0
echo "==== unit tier (make check)"
if ! make -C "$build" -j2 check; then
    status=1
    cat "$build"/test-suite.log 2>/dev/null | tail -60
fi

echo "==== device tier (make check-device)"
if ! make -C "$build" check-device; then
    status=1
fi

echo "==== tests finished in $(( $(date +%s) - start )) s: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
