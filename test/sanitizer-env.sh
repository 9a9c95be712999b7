# SPDX-License-Identifier: BSD-3-Clause
# Sourced by test/fuzz/run.sh, test/unit/asan.sh and test/unit/tsan.sh: they
# compile the sources they need themselves, with a sanitizer, into a work
# directory of their own (nothing in the build tree changes). This finds the
# sources and a configured build tree (for the UCX internal header flags,
# read from its Makefile) and provides zv_build, a parallel build through a
# generated Makefile (incremental when the work directory is kept).
#
# Environment: ZV_BUILDDIR (set by `make check`; otherwise the current
# directory, the source tree or <source>/build, whichever is configured),
# ZV_JOBS (compile jobs, default 2).

zv_srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
zv_builddir=${ZV_BUILDDIR:-}
if [ -z "$zv_builddir" ]; then
    for d in "$PWD" "$zv_srcdir" "$zv_srcdir/build"; do
        if [ -f "$d/Makefile" ] && grep -q '^UCX_INTERNAL_CPPFLAGS' "$d/Makefile"; then
            zv_builddir=$d
            break
        fi
    done
fi
if [ -z "$zv_builddir" ] || [ ! -f "$zv_builddir/Makefile" ]; then
    echo "FAIL: no configured build tree (run configure, or set ZV_BUILDDIR)"
    exit 1
fi
zv_builddir=$(cd "$zv_builddir" && pwd)

zv_make_var()
{
    sed -n "s/^$1 = //p" "$zv_builddir/Makefile" | sed "s|\$(top_builddir)|$zv_builddir|g"
}

ZV_CPPFLAGS="-I$zv_srcdir/src -I$zv_srcdir/include -I$zv_builddir \
$(zv_make_var UCX_INTERNAL_CPPFLAGS) $(zv_make_var IBVERBS_CFLAGS) $(zv_make_var HWLOC_CFLAGS)"
ZV_LIBS="-luct -lucs -lucm $(zv_make_var IBVERBS_LIBS) $(zv_make_var HWLOC_LIBS) -lpthread"
ZV_JOBS=${ZV_JOBS:-2}
# Our make is not the parent's: no jobserver inherited from `make check`.
unset MAKEFLAGS MFLAGS MAKELEVEL

# zv_build WORKDIR CXX CXXFLAGS UNIT_CXXFLAGS LDFLAGS PROGRAM=src[,src...] ...
# Builds each PROGRAM in WORKDIR from sources given relative to the source
# tree (UNIT_CXXFLAGS are added for test/unit/*); objects are shared between
# programs. Compiler output goes to WORKDIR/build.log; returns make's status.
zv_build()
{
    local work=$1 cxx=$2 cxxflags=$3 unitflags=$4 ldflags=$5
    shift 5
    local mk=$work/Makefile spec prog srcs src obj objs all=""
    {
        echo "CXX := $cxx"
        echo "CXXFLAGS := $cxxflags $ZV_CPPFLAGS"
        echo "LDFLAGS := $ldflags"
        echo "LIBS := $ZV_LIBS -lgtest"
        echo "obj/test_unit_%.o: CXXFLAGS += $unitflags"
        echo ".DELETE_ON_ERROR:"
    } > "$mk"
    declare -A seen=()
    for spec in "$@"; do
        prog=${spec%%=*}
        srcs=${spec#*=}
        objs=""
        for src in ${srcs//,/ }; do
            obj=obj/$(echo "${src%.*}" | tr / _).o
            objs="$objs $obj"
            if [ -z "${seen[$obj]:-}" ]; then
                seen[$obj]=1
                printf '%s: %s\n\t@mkdir -p obj\n\t$(CXX) $(CXXFLAGS) -MMD -c -o $@ $<\n' \
                    "$obj" "$zv_srcdir/$src" >> "$mk"
            fi
        done
        printf '%s:%s\n\t$(CXX) $(CXXFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)\n' "$prog" "$objs" >> "$mk"
        all="$all $prog"
    done
    printf 'all:%s\n-include obj/*.d\n' "$all" >> "$mk"
    make -s -C "$work" -j"$ZV_JOBS" -f Makefile all > "$work/build.log" 2>&1
}

# The steps asan.sh and tsan.sh share.
# zv_san_work NAME: the work directory into $work: $ZV_SAN_WORK/NAME (kept,
# incremental) or a new temporary one (removed after a pass).
zv_san_work()
{
    zv_san_tmp=0
    if [ -n "${ZV_SAN_WORK:-}" ]; then
        work=$ZV_SAN_WORK/$1
        mkdir -p "$work"
    else
        work=$(mktemp -d "${TMPDIR:-/tmp}/zv-$1.XXXXXX")
        zv_san_tmp=1
    fi
}

# zv_san_filter FILTER ['PATTERN|REASON'...]: a SKIP line for each test
# pattern the sanitizer cannot run, and FILTER without them in $filter.
zv_san_filter()
{
    local s neg
    filter=$1
    shift
    for s in "$@"; do
        echo "SKIP: ${s%%|*}: ${s#*|}"
    done
    neg=$(printf '%s\n' "$@" | sed -n 's/|.*//p' | paste -sd: -)
    if [ -n "$neg" ]; then
        case $filter in
        *-*) filter="$filter:$neg" ;; # already has negative patterns
        *) filter="$filter-$neg" ;;
        esac
    fi
}

# zv_san_run PROGRAM WHAT FINDINGS [test arguments]: runs $work/PROGRAM
# with $filter at ZV_TEST_SCALE (default 10) under a timeout (a hang is a
# failure too: timeout kills the test and its forked children), prints
# gtest's summary and the sanitizer's findings (FINDINGS, an extended
# regular expression), and exits 1 on failure (the work directory kept).
zv_san_run()
{
    local prog=$1 what=$2 findings=$3 rc start
    shift 3
    export ZV_TEST_SCALE=${ZV_TEST_SCALE:-10}
    start=$(date +%s)
    timeout -k 10 "${ZV_SAN_TIMEOUT:-900}" "$work/$prog" --gtest_filter="$filter" "$@" \
        > "$work/run.log" 2>&1
    rc=$?
    [ $rc = 124 ] && echo "FAIL: still running after ${ZV_SAN_TIMEOUT:-900} s: a hang? The last lines:" &&
        tail -5 "$work/run.log"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^\[  STRAY|$findings|SUMMARY:" "$work/run.log"
    echo "ran in $(( $(date +%s) - start )) s (ZV_TEST_SCALE=$ZV_TEST_SCALE)"
    if [ $rc != 0 ]; then
        grep -B2 -A40 -E "$findings" "$work/run.log" | head -80
        echo "FAIL: $what (exit $rc)"
        echo "work directory kept: $work"
        exit 1
    fi
    [ "$zv_san_tmp" = 1 ] && rm -rf "$work"
    echo "PASS: $what"
}
