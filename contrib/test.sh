#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: set up, build, then run both tiers - the unit tier
# natively (make check, then make distcheck of the release tarball) and the
# device tier in the Soft-RoCE VM, or on this host when it has an active
# RDMA port (make check-device).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${ZV_BUILDDIR:-$repo/build}
export ZV_BUILDDIR=$build
start=$(date +%s)
: "${ZV_DISTCHECK_TESTS=test/unit/zv_unit test/unit/module_load.sh test/unit/configure_mismatch.sh test/unit/readme_config.sh}"

"$repo/contrib/build.sh"

status=0
echo "==== unit tier (make check)"
if ! make -C "$build" -j2 check; then
    status=1
    cat "$build"/test-suite.log 2>/dev/null | tail -60
fi

# The release tarball: it builds in a directory of its own, passes the unit
# tests, installs under a prefix (DESTDIR too) and uninstalls cleanly. The
# sanitizer, valgrind and fuzz scripts already ran above; here only the
# quick unit tests (make distcheck alone runs them all).
echo "==== make distcheck"
dist_pass=0 dist_fail=0
if make -C "$build" distcheck TESTS="$ZV_DISTCHECK_TESTS" > "$build/distcheck.log" 2>&1; then
    dist_pass=1
    grep -E '^(PASS|FAIL|ERROR):|archives ready' "$build/distcheck.log" | sed 's/^/  /'
else
    dist_fail=1 status=1
    tail -n 40 "$build/distcheck.log"
fi
echo "distcheck: $dist_pass passed, $dist_fail failed"

# The Debian packages (dpkg-buildpackage, lintian); the device tier installs
# them in a VM of their own and runs an MPI job on them.
echo "==== Debian packages (contrib/deb/build.sh)"
deb_pass=0 deb_fail=0
export ZV_DEB_DIR=$build/deb
if "$repo/contrib/deb/build.sh" > "$build/deb.log" 2>&1; then
    deb_pass=1
    grep -vE '^  N:' "$build/deb.log" | sed 's/^/  /'
else
    deb_fail=1 status=1
    tail -n 40 "$build/deb.log"
fi
echo "packages: $deb_pass passed, $deb_fail failed"

echo "==== device tier (make check-device)"
log=$(mktemp); trap 'rm -f "$log"' EXIT
if ! (set -o pipefail; make -C "$build" check-device 2>&1 | tee "$log"); then
    status=1
fi

# One closing line: checks of both tiers (unit: automake's counts, and
# distcheck and the package build as one each; device:
# the harness's, the device tests', the two-rail and two-host stages' own
# counts).
unit_pass=$(sed -n 's/^# PASS: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
unit_fail=$(sed -n 's/^# FAIL: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
read -r dev_pass dev_fail < <(sed -n 's/^\(device: \|two-host: \|rails: \|package: \)\{0,1\}\([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\2 \3/p' "$log" |
                              awk '{p += $1; f += $2} END {print p + 0, f + 0}')
[ "$status" = 0 ] || [ $(( ${unit_fail:-0} + dist_fail + deb_fail + dev_fail )) -gt 0 ] || dev_fail=$((dev_fail + 1))
echo "==== tests finished in $(( $(date +%s) - start )) s: $([ $status = 0 ] && echo PASSED || echo FAILED)"
echo "total: $(( ${unit_pass:-0} + dist_pass + deb_pass + dev_pass )) passed, $(( ${unit_fail:-0} + dist_fail + deb_fail + dev_fail )) failed"
exit $status
