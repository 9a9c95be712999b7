#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The unit tests (zv_unit: the core library and every unit test source, as
# listed in the build tree's Makefile) compiled with AddressSanitizer and
# UndefinedBehaviorSanitizer (g++, every finding fatal, leaks included) into
# a work directory of their own, then run. Nothing in the build tree changes.
#
# usage: test/unit/asan.sh            (`make check`: long loops at 10 %)
#        ZV_TEST_SCALE=100 test/unit/asan.sh     (full length)
# env:   ZV_BUILDDIR, ZV_JOBS (test/sanitizer-env.sh); ZV_SAN_WORK (keep the
#        build there, incremental); ZV_SAN_TIMEOUT (seconds, default 900);
#        extra arguments go to the test binary.
set -u
. "$(dirname "$0")/../sanitizer-env.sh"

cxx=${ZV_SAN_CXX:-g++}
tmp=0
if [ -n "${ZV_SAN_WORK:-}" ]; then
    work=$ZV_SAN_WORK/asan
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/zv-asan.XXXXXX")
    tmp=1
fi

sources()
{
    awk -v v="$1" '$1 == v && $2 == "=" { on = 1 } on { print; if ($NF != "\\") exit }' \
        "$zv_builddir/Makefile" | tr ' \t\\' '\n\n\n' | grep -E '\.(cc|c)$' | paste -sd, -
}
# What zv_unit links: the core, the cache (libzv_rcache.la) and the C API
# (libzv_capi.la); the tests' C file (the C API's) is compiled as C++ here.
core=$(sources libzv_core_la_SOURCES),$(sources libzv_rcache_la_SOURCES),$(sources libzv_capi_la_SOURCES)
tests=$(sources test_unit_zv_unit_SOURCES)
case ",$core," in *,,*) core= ;; esac
[ -n "$core" ] && [ -n "$tests" ] || { echo "FAIL: no source lists in $zv_builddir/Makefile"; exit 1; }

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
start=$(date +%s)
# The library at -O1 (what optimisation does with undefined behaviour shows
# there); the tests at -O0, which halves their compile time.
if ! zv_build "$work" "$cxx" \
        "-std=gnu++17 -O1 -g1 -fno-omit-frame-pointer $san -I$zv_srcdir/test/unit" "-O0" \
        "$san" "zv_unit=$core,$tests"; then
    cat "$work/build.log"
    echo "FAIL: building zv_unit with $san"
    exit 1
fi
echo "built zv_unit with ASAN+UBSAN in $(( $(date +%s) - start )) s"

# Unsupported here (skipped, and said so):
skip=()
for s in "${skip[@]}"; do
    echo "SKIP: ${s%%|*}: ${s#*|}"
done
filter=${ZV_ASAN_FILTER:-*}
neg=$(printf '%s\n' "${skip[@]}" | sed -n 's/|.*//p' | paste -sd: -)
if [ -n "$neg" ]; then
    case $filter in
    *-*) filter="$filter:$neg" ;; # already has negative patterns
    *) filter="$filter-$neg" ;;
    esac
fi

export ZV_TEST_SCALE=${ZV_TEST_SCALE:-10}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
start=$(date +%s)
# A hang is a failure too (timeout kills the test and its forked children).
timeout -k 10 "${ZV_SAN_TIMEOUT:-900}" "$work/zv_unit" --gtest_filter="$filter" "$@" \
    > "$work/run.log" 2>&1
rc=$?
[ $rc = 124 ] && echo "FAIL: still running after ${ZV_SAN_TIMEOUT:-900} s: a hang? The last lines:" &&
    tail -5 "$work/run.log"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^\[  STRAY|ERROR: |runtime error:|SUMMARY:' "$work/run.log"
echo "ran in $(( $(date +%s) - start )) s (ZV_TEST_SCALE=$ZV_TEST_SCALE)"
if [ $rc != 0 ]; then
    grep -B2 -A30 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$work/run.log" | head -80
    echo "FAIL: zv_unit under ASAN+UBSAN (exit $rc)"
    echo "work directory kept: $work"
    exit 1
fi
[ $tmp = 1 ] && rm -rf "$work"
echo "PASS: zv_unit under ASAN+UBSAN"
