#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A rank that computes while its peers send to it (mpi-tests/zv_busy): the
# last rank makes no MPI call for ZV_BUSY_SECONDS (default 45, past every
# transport's 30 s timeouts) while the others send it an eager and a
# rendezvous message, some before any connection to it exists (cold), some
# over connections made before (warm), and enter an allreduce it joins only
# when it is back. Over rc_zv, ud_zv, uc_zv and rc_zv,ud_zv side by side
# (the jobs run at once: they wait, they are not timed), the computing
# rank blocked in read(); and once over ud_zv with it in a busy loop.
# Every job must exit 0 with its data validated. Beside them, the same job
# over UCX's own rc_verbs,ud_verbs: the peer, printed, not a check of ours.
#
# usage: sourced by device-tests.sh and two-host-tests.sh after the install
#        (see suite-lib.sh), or standalone on the device:
#        ZV_BUILDDIR=B ZV_SRCDIR=S test/device/busy-suite.sh
# Environment: ZV_BUSY_SECONDS (the long form: 600); ZV_BUSY_NP (ranks per
# job, default 4); ZV_BUSY_MODE (zv_busy's -m of the four jobs: mixed, the
# default, cold or warm; with 2 ranks mixed is cold); ZV_BUSY_MPIRUN_ARGS
# (extra mpirun arguments).
. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"
bs_secs=${ZV_BUSY_SECONDS:-45}
bs_np=${ZV_BUSY_NP:-4}
bs_mode=${ZV_BUSY_MODE:-mixed}
ms_timeout=$((bs_secs + 300))
# shellcheck disable=SC2206  # split on purpose
bs_args=(${ZV_BUSY_MPIRUN_ARGS:-})
bs_jobs=()
bs_start() { # name tl np zv_busy-args...
    local name=$1 tl=$2 np=$3; shift 3
    local tls=${tl//,/ }
    for t in $tls; do
        grep -q "Transport: $t\$" "$ms_dir/tls" || { echo "SKIP: $tl ($t not landed)"; return; }
    done
    ms_run "$tl" "$np" "${bs_args[@]}" -- "$ms_t/zv_busy" -s "$bs_secs" "$@" \
        > "$ms_dir/busy.$name" 2>&1 &
    bs_jobs+=("$!:$name:$tl:$np:$*")
}
bs_t0=$SECONDS
for bs_tl in rc_zv ud_zv uc_zv rc_zv,ud_zv; do
    bs_start "${bs_tl/,/+}" "$bs_tl" "$bs_np" -w read -m "$bs_mode"
done
bs_start ud_zv.spin ud_zv 2 -w spin -m warm
# (rxe: ud_verbs needs its DGID check off, as mpi-suite.sh's runs have it)
bs_zv_args=("${bs_args[@]}")
bs_args+=(-x UCX_UD_VERBS_ETH_DGID_CHECK=n)
bs_start peer rc_verbs,ud_verbs "$bs_np" -w read -m "$bs_mode"
bs_args=("${bs_zv_args[@]}")
for bs_j in "${bs_jobs[@]}"; do
    IFS=: read -r bs_pid bs_name bs_tl bs_n bs_how <<< "$bs_j"
    wait "$bs_pid"; bs_rc=$?
    grep '^busy:' "$ms_dir/busy.$bs_name" || tail -n 8 "$ms_dir/busy.$bs_name"
    if [ "$bs_name" = peer ]; then
        echo "peer: UCX's $bs_tl, $bs_n ranks ($bs_how): exit $bs_rc"
        continue
    fi
    check "MPI over $bs_tl, $bs_n ranks, one computing ${bs_secs} s ($bs_how): exit 0, data validated" \
        bash -c "test $bs_rc = 0 && grep -q '^busy: .*: 0 errors' '$ms_dir/busy.$bs_name'"
done
echo "busy-suite: $((SECONDS - bs_t0)) s"
if [ -n "${suite_standalone:-}" ]; then
    echo "busy-suite: $pass passed, $fail failed"
    [ $fail = 0 ]
fi
