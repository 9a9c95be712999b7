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
log=$(mktemp); trap 'rm -f "$log"' EXIT
if ! (set -o pipefail; make -C "$build" check-device 2>&1 | tee "$log"); then
    status=1
fi

# One closing line: checks of both tiers (unit: automake's counts; device:
# the harness's, the device tests', the two-rail and two-host stages' own
# counts).
unit_pass=$(sed -n 's/^# PASS: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
unit_fail=$(sed -n 's/^# FAIL: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
read -r dev_pass dev_fail < <(sed -n 's/^\(device: \|two-host: \|rails: \)\{0,1\}\([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\2 \3/p' "$log" |
                              awk '{p += $1; f += $2} END {print p + 0, f + 0}')
[ "$status" = 0 ] || [ $(( ${unit_fail:-0} + dev_fail )) -gt 0 ] || dev_fail=$((dev_fail + 1))
echo "==== tests finished in $(( $(date +%s) - start )) s: $([ $status = 0 ] && echo PASSED || echo FAILED)"
echo "total: $(( ${unit_pass:-0} + dev_pass )) passed, $(( ${unit_fail:-0} + dev_fail )) failed"
exit $status
