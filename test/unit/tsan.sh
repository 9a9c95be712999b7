#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The registration cache and monitor unit tests (the sources listed in
# src/rcache/rcache.am, with test/unit/main.cc), the C API's and the async
# gate's (src/iface/async_gate.cc) compiled with ThreadSanitizer
# into a work directory of their own, then run: any data race, lock-order
# inversion or thread leak fails. Nothing in the build tree changes.
#
# usage: test/unit/tsan.sh            (`make check`: long loops at 10 %)
#        ZV_TEST_SCALE=100 test/unit/tsan.sh     (full length)
# env:   ZV_BUILDDIR, ZV_JOBS (test/sanitizer-env.sh); ZV_SAN_WORK (keep the
#        build there, incremental); ZV_SAN_TIMEOUT (seconds, default 900);
#        extra arguments go to the test binary.
set -u
. "$(dirname "$0")/../sanitizer-env.sh"

cxx=${ZV_SAN_CXX:-g++}
zv_san_work tsan

# The .cc files of one '=' or '+=' block of rcache.am.
am_sources()
{
    awk -v v="$1" '$1 == v && ($2 == "+=" || $2 == "=") { on = 1; next } on { print; if ($NF != "\\") exit }' \
        "$zv_srcdir/src/rcache/rcache.am" | tr ' \t\\' '\n\n\n' | grep '\.cc$' | paste -sd, -
}
core=$(am_sources libzv_rcache_la_SOURCES)
# and the C API over them (its tests' C file compiled as C++)
tests=$(am_sources test_unit_zv_unit_SOURCES),src/capi/zverbs.cc,test/unit/capi_test.cc,test/unit/capi_c_test.c
# and the handshake between a worker and its interfaces' async side (its
# timer's channel is a verbs handle: src/verbs/owned.cc destroys it)
tests=$tests,src/iface/async_gate.cc,src/verbs/owned.cc,test/unit/gate_test.cc
[ -n "$core" ] && [ -n "$tests" ] || { echo "FAIL: no source lists in src/rcache/rcache.am"; exit 1; }

san="-fsanitize=thread"
start=$(date +%s)
# The library at -O1, the tests at -O0 (half the compile time).
if ! zv_build "$work" "$cxx" "-std=gnu++17 -O1 -g1 $san -I$zv_srcdir/test/unit" "-O0" "$san" \
        "zv_rcache_tsan=test/unit/main.cc,$core,$tests"; then
    cat "$work/build.log"
    echo "FAIL: building the cache and monitor tests with $san"
    exit 1
fi
echo "built the cache and monitor tests with TSAN in $(( $(date +%s) - start )) s"

# Unsupported under TSAN (skipped, and said so). UCM's hooks and TSAN cannot
# share a process: UCM patches libc's own calls too, so glibc's madvise() of
# an exiting thread's stack runs UCM code that takes a pthread rwlock after
# TSAN has torn down that thread's state, and TSAN's interceptor crashes
# (SIGSEGV in __tsan::MutexPreReadLock <- ucm_event_enter <- ucm_madvise <-
# advise_stack_range). Any UCM event handler installs the hooks for the
# whole process, so UCM events are turned off (UCX_MEM_EVENTS=no) for the
# whole run, which also takes the uffd monitor's one UCM helper away.
export UCX_MEM_EVENTS=no
skip=(
    "*/ucm|the ucm monitor: UCM's hooks crash TSAN at thread exit (UCX_MEM_EVENTS=no here)"
    "*shmat_remap_and_shmdt/uffd*|uffd sees shmat(SHM_REMAP) only through UCM's shmat event, off here"
)
zv_san_filter "${ZV_TSAN_FILTER:-*}" "${skip[@]}"
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=1}
zv_san_run zv_rcache_tsan "cache and monitor tests under TSAN" 'WARNING: ThreadSanitizer' "$@"
