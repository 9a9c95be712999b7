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
zv_san_work asan

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

# Nothing here is unsupported under ASAN+UBSAN (no test skipped).
zv_san_filter "${ZV_ASAN_FILTER:-*}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
zv_san_run zv_unit "zv_unit under ASAN+UBSAN" 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$@"
