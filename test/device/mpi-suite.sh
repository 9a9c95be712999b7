#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI suite of the device tier, over every zv transport the module offers:
# the mpi-tests programs (bi-directional and multi-pair bandwidth, fresh
# buffers, collectives, MPI one-sided over osc ucx, the registration-cache
# stress under each monitor) and three unmodified Debian MPI applications
# with their own correctness checks (hpcc's Success flag, LAMMPS melt thermo
# output equal to a reference run over shared memory, NetPIPE's integrity
# mode). Short versions, sized for CI in the emulated VM.
#
# usage: sourced by device-tests.sh after `make install` (uses its check(),
#        $b, $s, $dev, $tmp and counts into its pass/fail; see suite-lib.sh),
#        or standalone on the device:  ZV_BUILDDIR=B ZV_SRCDIR=S test/device/mpi-suite.sh
#        (installs the build first; prints its own totals).
# Environment: ZV_MPI_TLS (default "rc_zv ud_zv uc_zv": transports to try;
# one not offered by the module is printed as "not landed", not counted);
# ZV_MPI_HPCC_TLS (default rc_zv): the transports hpcc runs over. hpcc's
# LatencyBandwidth section alone took 157 s over rc_zv and 528 s over ud_zv
# in the VM, too long for CI on every transport; "rc_zv ud_zv uc_zv" runs
# it over all of them.
. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"
ms_start=$(date +%s)
# ms_prog NAME TL NP [mpirun args] -- PROGRAM ARGS: run, show the tail, check.
ms_prog() {
    local name=$1 tl=$2 np=$3 rc t0=$SECONDS; shift 3
    ms_run "$tl" "$np" "$@" > "$ms_dir/out" 2>&1; rc=$?
    tail -n 1 "$ms_dir/out"; echo "  ($((SECONDS - t0)) s)"
    [ $rc = 0 ] || tail -n 15 "$ms_dir/out"
    check "MPI $name over $tl ($np ranks)" test $rc = 0
}

# ---- the reference LAMMPS run: same input, same 2 ranks, shared memory
ms_lmp_args=(-in "$s/mpi-tests/apps/in.melt" -var cells 6 -var steps 100 -log none -echo none)
ms_thermo() { awk '/^ *Step /{f=1} /^Loop time/{f=0} f' "$1"; }
(cd "$ms_dir" && timeout 600 mpirun --allow-run-as-root -np 2 --mca pml ob1 \
    --mca btl self,vader lmp "${ms_lmp_args[@]}") > "$ms_dir/lmp.ref" 2>&1
ms_thermo "$ms_dir/lmp.ref" > "$ms_dir/thermo.ref"
cat "$ms_dir/thermo.ref"
check "LAMMPS melt reference run (ob1, shared memory)" test "$(wc -l < "$ms_dir/thermo.ref")" -ge 5

# ---- queue pairs of a job whose ranks all talked to each other both ways
# (eager and rendezvous, data validated), read from the kernel while the
# job runs (zv_qps; it matches each QP's peer QP to a rank). Between two
# ranks, rc_zv must hold no more RC QPs than rc_verbs in the same run, and
# uc_zv no more UC QPs: the two directions share one QP at each end.
ms_qps() { # tl np [mpirun args]: run zv_qps, print its lines; the most RC
           # (rc_*) or UC (uc_zv) QPs per pair of ranks goes to $ms_dir/qps
           # ("x" if none)
    local tl=$1 np=$2 type=RC; shift 2
    [ "$tl" != uc_zv ] || type=UC
    ms_run "$tl" "$np" "$@" -- "$ms_t/zv_qps" -S 262144 > "$ms_dir/q.out" 2>&1; local rc=$?
    echo "  $tl, $np ranks (exit $rc):"; grep -E '^(qps|data)' "$ms_dir/q.out" | sed 's/^/    /'
    [ $rc = 0 ] || tail -n 5 "$ms_dir/q.out"
    local m; m=$(sed -n "s/^qps $type: .*per pair of ranks [0-9]*\.\.\([0-9]*\),.*/\1/p" "$ms_dir/q.out")
    [ $rc = 0 ] && [ -n "$m" ] && echo "$m" > "$ms_dir/qps" || echo x > "$ms_dir/qps"
}
for ms_np in 2 4; do
    ms_qps rc_verbs,ud_verbs $ms_np -x UCX_UD_VERBS_ETH_DGID_CHECK=n   # (rxe: no DGID check)
    read -r ms_v_rc < "$ms_dir/qps"
    # rc_verbs connects its RC lanes lazily, through ud_verbs; on a loaded
    # host one pair's may not be there within zv_qps's 60 s (seen once in
    # CI: 0 pairs matched). Then the bound is what rc_verbs holds once
    # connected, one QP at each end: 2, said so.
    ms_lim=$ms_v_rc
    if [ "$ms_v_rc" = 0 ]; then
        ms_lim=2; echo "  (rc_verbs did not finish connecting: bound 2, one QP at each end)"
    fi
    for ms_tl in rc_zv uc_zv; do
        grep -q "Transport: $ms_tl\$" "$ms_dir/tls" || continue
        ms_qps $ms_tl $ms_np
        read -r ms_z < "$ms_dir/qps"
        check "MPI over $ms_tl, $ms_np ranks: QPs per pair of ranks ($ms_z) no more than rc_verbs' ($ms_lim)" \
              test "$ms_lim" != x -a "$ms_z" != x -a "$ms_z" -le "$ms_lim" -a "$ms_z" -gt 0
    done
done

for ms_tl in ${ZV_MPI_TLS:-rc_zv ud_zv uc_zv}; do
    if ! grep -q "Transport: $ms_tl\$" "$ms_dir/tls"; then
        echo "SKIP: $ms_tl not landed (the module does not offer it)"
        continue
    fi
    ms_t0=$(date +%s)
    echo "---- MPI suite over $ms_tl"
    # point to point beyond device-tests.sh's lat/bw: bibw, 2 pairs, fresh
    # (4 ranks on 2 CPUs are oversubscribed: slow, checked for data only)
    ms_prog "bibw 1 B..64 KiB validated" "$ms_tl" 2 -- "$ms_t/zv_osu" -t bibw -S 65536 -i 8
    ms_prog "multi-pair bw 1 B..16 KiB validated" "$ms_tl" 4 -- "$ms_t/zv_osu" -t bw -S 16384 -i 2
    ms_prog "lat 1 B..1 MiB, a fresh buffer every iteration" "$ms_tl" 2 -- \
        "$ms_t/zv_osu" -t lat -S 1048576 -i 4 -F
    # collectives, 4 ranks (tree/pairwise algorithms, not just 2-rank cases)
    ms_prog "allreduce, alltoall, bcast 1 B..16 KiB validated" "$ms_tl" 4 -- \
        "$ms_t/zv_coll" -t all -S 16384 -i 2
    # MPI_THREAD_MULTIPLE: 4 threads per rank sending from fresh buffers at
    # once (registrations from every thread), eager and rendezvous sizes
    ms_prog "4 threads at once (MPI_THREAD_MULTIPLE), 1 B..1 MiB fresh buffers validated" \
        "$ms_tl" 2 -- "$ms_t/zv_threads" -T 4 -S 1048576 -i 3
    # one-sided over UCX (Debian disables osc ucx unless asked for)
    for ms_m in fence lock; do
        ms_prog "one-sided put, get, acc ($ms_m) 1 B..64 KiB validated" "$ms_tl" 2 --mca osc ucx -- \
            "$ms_t/zv_rma" -t all -m $ms_m -S 65536 -i 2
    done
    # registration cache stress: the kernel notifier and cache-off must be
    # clean in every mode; the intercept (ucm) cannot see direct system
    # calls by design, so only its libc modes are asserted. (device-tests.sh
    # already runs uffd and none over rc_zv.)
    ms_mons="uffd ucm none"; [ $ms_tl != rc_zv ] || ms_mons=ucm
    for ms_mon in $ms_mons; do
        ms_t1=$SECONDS
        ms_run "$ms_tl" 2 -x UCX_ZV_RCACHE_MONITOR=$ms_mon "$ms_t/zv_cache_stress" -n 3 \
            > "$ms_dir/cs" 2>&1; ms_rc=$?
        grep -vE '^-+$|^$' "$ms_dir/cs" | head -n 8 | sed "s/^/  [$ms_mon] /"
        echo "  ($((SECONDS - ms_t1)) s)"
        if [ $ms_mon = ucm ]; then
            ms_bad=$(awk '/^(reuse|free\+malloc|munmap\+mmap|realloc)/ {s += $NF; n++}
                          END {print (n == 4 ? s : "missing")}' "$ms_dir/cs")
            check "MPI cache stress over $ms_tl, monitor ucm: libc modes clean" test "$ms_bad" = 0
        else
            check "MPI cache stress over $ms_tl, monitor $ms_mon: nothing stale" test $ms_rc = 0
        fi
    done

    # ---- unmodified applications
    # hpcc: HPL, PTRANS, FFT, RandomAccess, STREAM, DGEMM, b_eff at N=200
    if [[ " ${ZV_MPI_HPCC_TLS:-rc_zv} " != *" $ms_tl "* ]]; then
        echo "SKIP: hpcc over $ms_tl (not in ZV_MPI_HPCC_TLS)"
    else
        ms_t1=$SECONDS
        mkdir -p "$ms_dir/hpcc.$ms_tl"
        sed 's/N_HERE/200/' "$s/mpi-tests/apps/hpccinf.txt" > "$ms_dir/hpcc.$ms_tl/hpccinf.txt"
        (cd "$ms_dir/hpcc.$ms_tl" && ms_run "$ms_tl" 2 hpcc) > "$ms_dir/hpcc.log" 2>&1; ms_rc=$?
        ms_f=$ms_dir/hpcc.$ms_tl/hpccoutf.txt
        grep -E '^(Success|HPL_Tflops|PTRANS_residual|MPIRandomAccess_Errors|MPIFFT_maxErr)=' "$ms_f" 2>/dev/null | tr '\n' ' '
        awk '/^Begin of .* section/ {n = $3} /^Current time \(/ {t = substr($3, 2) + 0; if (p) s[n] += t - p; p = t}
             END {for (k in s) if (s[k] > 1) printf "%s %ds, ", k, s[k]}' "$ms_f" 2>/dev/null
        echo "($((SECONDS - ms_t1)) s)"
        check "hpcc over $ms_tl: exit 0, Success=1, no failed residual checks, no RandomAccess errors" \
            bash -c "test $ms_rc = 0 && grep -q '^Success=1\$' '$ms_f' &&
                     ! grep -qE '^ *[1-9][0-9]* tests? completed and failed' '$ms_f' &&
                     ! grep -qE '^MPIRandomAccess(_LCG)?_Errors=[^0]' '$ms_f'"
    fi
    # LAMMPS: thermo output identical to the reference (same input, same
    # rank count, same decomposition: the transport only moves bytes)
    ms_t1=$SECONDS
    (cd "$ms_dir" && ms_run "$ms_tl" 2 lmp "${ms_lmp_args[@]}") > "$ms_dir/lmp.$ms_tl" 2>&1; ms_rc=$?
    ms_thermo "$ms_dir/lmp.$ms_tl" > "$ms_dir/thermo.$ms_tl"
    diff "$ms_dir/thermo.ref" "$ms_dir/thermo.$ms_tl" | head -n 6; echo "  LAMMPS: $((SECONDS - ms_t1)) s"
    check "LAMMPS melt over $ms_tl: thermo output identical to the reference" \
        bash -c "test $ms_rc = 0 && test -s '$ms_dir/thermo.$ms_tl' && cmp -s '$ms_dir/thermo.ref' '$ms_dir/thermo.$ms_tl'"
    # NetPIPE integrity mode: every size (with +-3 B perturbations) checked
    ms_t1=$SECONDS
    (cd "$ms_dir" && ms_run "$ms_tl" 2 NPopenmpi -i -n 2 -u 1048576 -o /dev/null) \
        > "$ms_dir/np.log" 2>&1; ms_rc=$?
    ms_ok=$(grep -c 'Integrity check passed' "$ms_dir/np.log")
    ms_bad=$(grep -c 'Integrity check failed' "$ms_dir/np.log")
    echo "NetPIPE: $ms_ok sizes passed, $ms_bad failed ($((SECONDS - ms_t1)) s)"
    check "NetPIPE integrity (-i) 1 B..1 MiB over $ms_tl" \
        test $ms_rc = 0 -a "$ms_ok" -ge 30 -a "$ms_bad" = 0
    echo "---- $ms_tl: $(( $(date +%s) - ms_t0 )) s"
done
echo "mpi-suite: $(( $(date +%s) - ms_start )) s"
if [ -n "${suite_standalone:-}" ]; then
    echo "mpi-suite: $pass passed, $fail failed"
    [ $fail = 0 ]
fi
