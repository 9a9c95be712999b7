#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: set up, build, then run both tiers - the unit tier
# natively (make check, then make distcheck of the release tarball) and the
# device tier in the Soft-RoCE VM, or on this host when it has an active
# RDMA port (make check-device).
#
# usage: contrib/test.sh           every tier (what CI runs)
#        contrib/test.sh --quick   the quick tier while working: the unit
#                                  tests without the sanitizer, valgrind and
#                                  fuzz scripts, and the UCT device tests
#                                  (test/device/zv_device) in one VM boot
# Ends with a table of stage times and one line of totals.
set -eu
quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: contrib/test.sh [--quick]" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${ZV_BUILDDIR:-$repo/build}
export ZV_BUILDDIR=$build
start=$SECONDS
. "$repo/contrib/stages.sh"

mkdir -p "$build"
export ZV_STAGE_TIMES=$build/stage-times
: > "$ZV_STAGE_TIMES"

stage_run "setup and build (contrib/build.sh)" "$repo/contrib/build.sh"
# The quick unit tests (Makefile.am's QUICK_TESTS); make distcheck runs them too.
quick_tests=$(make -s --no-print-directory -C "$build" print-quick-tests)
: "${ZV_DISTCHECK_TESTS=$quick_tests}"

status=0
log=$(mktemp); trap 'rm -f "$log"' EXIT
dist_pass=0 dist_fail=0 deb_pass=0 deb_fail=0 beside_unit_pass=0 beside_unit_fail=0
if [ $quick = 1 ]; then
    echo "==== unit tier (make check, quick: $quick_tests)"
    if ! stage_run "unit tier, quick tests (make check-quick)" make -C "$build" -j2 check-quick; then
        status=1
        tail -60 "$build"/test-suite.log 2>/dev/null
    fi
    # One VM boot: the UCT device tests alone (device-tests.sh runs them
    # among its other checks in the full tier).
    echo "==== UCT device tests (test/device/zv_device, one VM boot)"
    # (written in the VM: the build directory is shared; kept for a look)
    log_keep=$build/zv_device.log
    quick_device() {
        "$repo/contrib/vm/run.sh" --timeout 1600 --cpus 2 --share "$repo" --share "$build" \
            -e ZV_BUILDDIR="$build" -- "$repo/test/device/uct-tests.sh" "$log_keep"
    }
    if ! stage_run "UCT device tests (zv_device in the VM)" quick_device; then
        status=1
    fi
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^\[  (PASSED|FAILED)|tests ran' "$log_keep" || true
    [ $status = 0 ] || tail -n 25 "$log_keep" | cut -c1-200
    # gtest's summary: "[  PASSED  ] N tests." and " N FAILED TESTS"
    # (one summary per shard: test/device/uct-tests.sh)
    dev_pass=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\.$/\1/p' "$log_keep" | awk '{n += $1} END {print n + 0}')
    dev_fail=$(sed -n 's/^ *\([0-9]*\) FAILED TESTS\{0,1\}$/\1/p' "$log_keep" | awk '{n += $1} END {print n + 0}')
    dev_pass=${dev_pass:-0} dev_fail=${dev_fail:-0}
    if grep -q '^\[  SKIPPED \]' "$log_keep"; then
        echo "UCT device tests: a test was skipped (the device tier allows none)"
        status=1
    fi
    [ "$status" = 0 ] || [ "$dev_fail" -gt 0 ] || dev_fail=1
else
    echo "==== unit tier (make check: the quick tests now, the rest beside the device tier)"
    if ! stage_run "unit tier, quick tests (make check-quick)" make -C "$build" -j2 check-quick; then
        status=1
        tail -60 "$build"/test-suite.log 2>/dev/null
    fi
    # Beside the device tier, at the lowest priority: the rest of the unit
    # tier (valgrind, the sanitizer builds, fuzzing, the C API's install),
    # make distcheck and the Debian packages. They compile on what CPU the
    # VMs leave (their guests wait for timers, boots and peers a good part
    # of the time); at nice 19 they take next to nothing from a busy guest.
    # Their own stage times go to a table of their own.
    export ZV_DEB_DIR=$build/deb
    # The packages first: the package stage needs them when the device tier
    # ends, and the rest may still be running then (the package stage's VM
    # runs beside it). $build/deb.status holds their result once built.
    deb_status=$build/deb.status
    rm -f "$deb_status"
    beside() {
        local ZV_STAGE_TIMES=$build/stage-times.beside rc=0
        renice -n 19 -p $BASHPID > /dev/null   # (what it starts inherits it)
        : > "$ZV_STAGE_TIMES"
        # The Debian packages (dpkg-buildpackage, lintian), without the
        # package's own unit tests (nocheck: they run twice here); the
        # package stage installs them in a VM of their own.
        echo "==== Debian packages (contrib/deb/build.sh)"
        if DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" \
           stage_run "Debian packages (dpkg-buildpackage, lintian)" "$repo/contrib/deb/build.sh" \
               > "$build/deb.log" 2>&1; then
            echo "packages: 1 passed, 0 failed"
            grep -vE '^  N:' "$build/deb.log" | sed 's/^/  /' || true
            echo 0 > "$deb_status"
        else
            echo "packages: 0 passed, 1 failed"; rc=1
            tail -n 40 "$build/deb.log"
            echo 1 > "$deb_status"
        fi
        echo "==== unit tier, the rest (make check-rest)"
        stage_run "unit tier, the rest (make check-rest)" make -C "$build" check-rest \
            > "$build/unit-rest.log" 2>&1 || rc=1
        grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS):' "$build/unit-rest.log" || true
        [ $rc = 0 ] || tail -60 "$build/test-suite-rest.log"
        # The release tarball: it builds in a directory of its own, passes
        # the quick unit tests, installs under a prefix (DESTDIR too) and
        # uninstalls cleanly. Of the test programs it builds only what those
        # tests run: zv_unit, zv_nomem, and zv_probe for module_load.sh (the device
        # tests and the other MPI programs are the device tier's).
        echo "==== make distcheck"
        if stage_run "make distcheck" make -C "$build" distcheck TESTS="$ZV_DISTCHECK_TESTS" \
               check_PROGRAMS='test/unit/zv_unit$(EXEEXT) test/unit/zv_nomem$(EXEEXT) mpi-tests/zv_probe$(EXEEXT)' \
               > "$build/distcheck.log" 2>&1; then
            echo "distcheck: 1 passed, 0 failed"
            grep -E '^(PASS|FAIL|ERROR):|archives ready' "$build/distcheck.log" | sed 's/^/  /' || true
        else
            echo "distcheck: 0 passed, 1 failed"; rc=1
            tail -n 40 "$build/distcheck.log"
        fi
        return $rc
    }
    beside > "$build/beside.log" 2>&1 &
    beside_pid=$!

    echo "==== device tier (make check-device)"
    if ! (set -o pipefail; ZV_DEVICE_STAGES="harness one-vm rails two-host" \
          make -C "$build" check-device 2>&1 | tee "$log"); then
        status=1
    fi
    # The package stage needs only the packages: it runs while the rest of
    # what is beside may still be going.
    t0=$SECONDS
    while [ ! -s "$deb_status" ] && kill -0 $beside_pid 2>/dev/null; do sleep 2; done
    deb_rc=$(cat "$deb_status" 2>/dev/null || echo 1)
    echo "==== device tier: the packages installed in a VM (make check-device; waited $((SECONDS - t0)) s for them)"
    if [ "$deb_rc" = 0 ]; then
        if ! (set -o pipefail; ZV_DEVICE_STAGES=packages make -C "$build" check-device 2>&1 | tee -a "$log"); then
            status=1
        fi
    else
        echo "package stage not run: the packages did not build"
    fi
    echo "==== beside the device tier: the packages, the rest of the unit tier, make distcheck"
    t0=$SECONDS
    beside_rc=0; wait $beside_pid || beside_rc=$?
    echo "(waited $((SECONDS - t0)) s for them after the device tier)"
    cat "$build/beside.log"
    [ $beside_rc = 0 ] || status=1
    beside_unit_pass=$(sed -n 's/^# PASS: *//p' "$build/test-suite-rest.log" 2>/dev/null | head -n1)
    beside_unit_fail=$(sed -n 's/^# FAIL: *//p' "$build/test-suite-rest.log" 2>/dev/null | head -n1)
    ! grep -q '^distcheck: 1 passed' "$build/beside.log" || dist_pass=1
    grep -q '^distcheck: 1 passed' "$build/beside.log" || dist_fail=1
    ! grep -q '^packages: 1 passed' "$build/beside.log" || deb_pass=1
    grep -q '^packages: 1 passed' "$build/beside.log" || deb_fail=1

    # The device checks: the harness's, the device tests', the two-rail,
    # two-host and package stages' own counts.
    read -r dev_pass dev_fail < <(sed -n 's/^\(device: \|two-host: \|rails: \|package: \)\{0,1\}\([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\2 \3/p' "$log" |
                                  awk '{p += $1; f += $2} END {print p + 0, f + 0}')
fi

# The closing lines: where the time went, then the checks of both tiers
# (unit: automake's counts, distcheck and the package build as one each).
unit_pass=$(sed -n 's/^# PASS: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
unit_fail=$(sed -n 's/^# FAIL: *//p' "$build/test-suite.log" 2>/dev/null | head -n1)
[ "$status" = 0 ] || [ $(( ${unit_fail:-0} + ${beside_unit_fail:-0} + dist_fail + deb_fail + dev_fail )) -gt 0 ] || dev_fail=$((dev_fail + 1))
stage_table "$ZV_STAGE_TIMES" $((SECONDS - start))
if [ -s "$build/stage-times.beside" ]; then
    echo "  beside the device tier (nice 19):"
    stage_table "$build/stage-times.beside" $((SECONDS - start)) | tail -n +2
fi
echo "==== tests$([ $quick = 0 ] || echo " (quick tier)") finished in $((SECONDS - start)) s: $([ $status = 0 ] && echo PASSED || echo FAILED)"
echo "total: $(( ${unit_pass:-0} + ${beside_unit_pass:-0} + dist_pass + deb_pass + dev_pass )) passed, $(( ${unit_fail:-0} + ${beside_unit_fail:-0} + dist_fail + deb_fail + dev_fail )) failed"
# A unit test that could not run here (automake's SKIP, exit 77: such as
# plugin_load.sh against a UCX without its own module loader) is not a
# pass: said apart, with the test's reason.
# (the rest's log only where this run made it)
skip_logs=("$build/test-suite.log")
[ "$quick" = 1 ] || skip_logs+=("$build/test-suite-rest.log")
unit_skip=0
for log in "${skip_logs[@]}"; do
    n=$(sed -n 's/^# SKIP: *//p' "$log" 2>/dev/null | head -n1)
    unit_skip=$((unit_skip + ${n:-0}))
done
if [ "$unit_skip" -gt 0 ]; then
    echo "skipped (not counted above): $unit_skip"
    cat "${skip_logs[@]}" 2>/dev/null | grep '^SKIP: ' | sed 's/^/  /'
fi
exit $status
