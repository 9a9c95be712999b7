# SPDX-License-Identifier: BSD-3-Clause
# Stage times of the test command (sourced by contrib/test.sh,
# test/device/run-tier.sh and the device suites, never run). Each stage
# appends one line to $ZV_STAGE_TIMES (a file in the build directory, which
# the VMs share at the same path): its depth, name, seconds and result.
# contrib/test.sh prints them as a table at the end, so that the next
# slowdown is visible in every CI log.

# stage_run NAME COMMAND...: run COMMAND, record how long it took and
# whether it passed; its exit status is COMMAND's.
stage_run()
{
    local name=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    stage_record 0 "$name" $((SECONDS - t0)) $rc
    return $rc
}

# stage_record DEPTH NAME SECONDS STATUS: one line (depth 1: a part of the
# stage recorded next at depth 0, which is recorded when it ends).
stage_record()
{
    [ -n "${ZV_STAGE_TIMES:-}" ] || return 0
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$([ "$4" = 0 ] && echo ok || echo FAILED)" \
        >> "$ZV_STAGE_TIMES"
}

# Parts of a long stage (inside the VM): part_begin NAME ... part_end; the
# part's time is recorded as it ends (or when the next one begins).
part_begin()
{
    part_end
    zv_part_name=$1 zv_part_t0=$SECONDS zv_part_fail0=${fail:-0}
}
part_end()
{
    [ -n "${zv_part_name:-}" ] || return 0
    stage_record 1 "$zv_part_name" $((SECONDS - zv_part_t0)) $(( ${fail:-0} - zv_part_fail0 ))
    zv_part_name=
}

# stage_table FILE TOTAL: the table, parts indented under their stage.
stage_table()
{
    [ -s "$1" ] || return 0
    echo "==== stage times (seconds; total $2 s)"
    # Parts come before the stage that holds them: print each stage, then
    # the parts recorded since the previous stage.
    awk -F'\t' '
        $1 == 1 { part[++np] = sprintf("    %-52s %6d  %s", $2, $3, $4); next }
        { printf "  %-54s %6d  %s\n", $2, $3, $4
          for (i = 1; i <= np; ++i) print part[i]
          np = 0 }
        END { for (i = 1; i <= np; ++i) print part[i] }' "$1"
}
