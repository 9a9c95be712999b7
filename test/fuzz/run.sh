#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz the receive-side parsers and the reliability state machine: builds one
# libFuzzer target per parser with clang (-fsanitize=fuzzer,address,undefined,
# every finding fatal, leaks included) and runs each for SECONDS, starting
# from the committed seed corpus (test/fuzz/corpus/<target>). Any crash,
# out-of-bounds access, undefined behaviour, leak, timeout or violated
# property fails, and the input is kept.
#
# usage: test/fuzz/run.sh [SECONDS]     (default 10 per target: `make check`)
#        test/fuzz/run.sh 600           (the long run)
# env:   ZV_BUILDDIR (configured build tree, see test/sanitizer-env.sh),
#        ZV_FUZZ_WORK (keep builds, grown corpora and findings there; default:
#        a temporary directory, removed unless something failed),
#        ZV_FUZZ_TARGETS (subset, e.g. "rel ud_packet").
set -u
seconds=${1:-10}
. "$(dirname "$0")/../sanitizer-env.sh"
fuzzdir=$zv_srcdir/test/fuzz

cxx=${ZV_FUZZ_CXX:-clang++}
if ! command -v "$cxx" > /dev/null; then
    echo "FAIL: $cxx not found (contrib/setup.sh installs clang and libclang-rt-dev)"
    exit 1
fi

if [ -n "${ZV_FUZZ_WORK:-}" ]; then
    work=$ZV_FUZZ_WORK
    mkdir -p "$work"
    keep=1
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/zv-fuzz.XXXXXX")
    keep=0
fi

# target=sources: the harness and the parser's own file, nothing else.
declare -A sources=(
    [ud_packet]=test/fuzz/fuzz_ud_packet.cc
    [conn_msg]=test/fuzz/fuzz_conn_msg.cc,src/iface/conn_wire.cc
    [rc_am]=test/fuzz/fuzz_rc_am.cc
    [rel]=test/fuzz/fuzz_rel.cc
)
targets=${ZV_FUZZ_TARGETS:-ud_packet conn_msg rc_am rel}

specs=()
for t in $targets; do
    [ -n "${sources[$t]:-}" ] || { echo "FAIL: unknown target $t"; exit 1; }
    specs+=("fuzz_$t=${sources[$t]}")
done
start=$(date +%s)
if ! zv_build "$work" "$cxx" \
        "-std=gnu++17 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all" \
        "" "-fsanitize=fuzzer,address,undefined" "${specs[@]}"; then
    cat "$work/build.log"
    echo "FAIL: building the fuzz targets (in $work)"
    exit 1
fi
echo "built ${targets// /, } in $(( $(date +%s) - start )) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for t in $targets; do
    corpus=$work/corpus/$t
    mkdir -p "$corpus" "$work/findings/$t"
    log=$work/$t.log
    # New inputs go to the work corpus; the committed seeds are read only.
    "$work/fuzz_$t" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/findings/$t/" "$corpus" "$fuzzdir/corpus/$t" > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    units=$(ls "$corpus" | wc -l)
    if [ $rc = 0 ]; then
        printf 'PASS: %-10s %s s, %s executions (%s/s), %s, corpus +%s\n' \
            "$t" "$seconds" "${execs:-?}" "${speed:-?}" "${cov:-cov: ?}" "$units"
    else
        failed=1
        echo "FAIL: $t (exit $rc); the last lines of $log:"
        grep -v '^#[0-9]' "$log" | tail -40
        for f in "$work/findings/$t"/*; do
            [ -f "$f" ] || continue
            echo "input kept: $f"
            od -A d -t x1 "$f" | head -20
            echo "reproduce: $work/fuzz_$t $f"
        done
    fi
done

if [ $failed = 0 ] && [ $keep = 0 ]; then
    rm -rf "$work"
elif [ $failed != 0 ]; then
    echo "work directory kept: $work"
fi
exit $failed
