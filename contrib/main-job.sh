#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Main-job body, run on the device (inside the VM or on a real HCA): an MPI
# latency/bandwidth sweep over rc_zv beside UCX's rc_verbs, same device,
# same run, interleaved, data validated on every receive; one table.
set -eu
b=${ZV_BUILDDIR:?}
max=${ZV_MAIN_MAX:-1048576}
iters=${ZV_MAIN_ITERS:-200}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
echo "== device"
ibv_devinfo -d "$dev" | grep -E 'hca_id|port:|state|active_mtu|link_layer'

echo
echo "== installing zverbs (the VM's root is a throw-away overlay)"
make -C "$b" install > "$tmp/install.log" 2>&1 || { tail "$tmp/install.log"; exit 1; }
ldconfig
ompi_info | grep -E 'MCA rcache: zverbs'

np=2
slots=$(nproc)
[ "$slots" -ge 2 ] || echo "note: $slots CPU: the two ranks share it (figures are for comparison only)"

# transport label -> mpirun arguments. No LD_PRELOAD: the rcache/zverbs
# component brings the module in.
run() { # label test
    local label=$1 test=$2 args
    case $label in
    rc_zv)    args=(--mca pml_ucx_tls rc_zv -x UCX_TLS=rc_zv,self) ;;
    rc_verbs) args=(--mca pml_ucx_tls rc_verbs -x UCX_TLS=rc_verbs,ud_verbs,self
                    -x UCX_UD_VERBS_ETH_DGID_CHECK=n) ;;
    esac
    mpirun --allow-run-as-root -np $np $([ "$slots" -ge 2 ] || echo --oversubscribe) \
        --mca pml ucx --mca pml_ucx_devices "$dev" -x UCX_NET_DEVICES="$dev:1" \
        "${args[@]}" "$b/mpi-tests/zv_osu" -t "$test" -S "$max" -i "$iters" -q \
        > "$tmp/$label.$test" 2> "$tmp/$label.$test.err" || {
            echo "FAILED: $label $test"; cat "$tmp/$label.$test.err" | tail -20; return 1; }
}

status=0
for test in lat bw; do
    for label in rc_zv rc_verbs; do   # interleaved, same run
        run "$label" "$test" || status=1
    done
done

echo
echo "== MPI over pml ucx, 2 ranks, data validated (zv_osu); ratio = rc_zv / rc_verbs"
printf '%10s | %12s %12s %7s | %12s %12s %7s | %s\n' size "zv lat us" "verbs lat us" "ratio" \
    "zv MB/s" "verbs MB/s" "ratio" errors
join_cols() {
    paste "$tmp/rc_zv.lat" "$tmp/rc_verbs.lat" "$tmp/rc_zv.bw" "$tmp/rc_verbs.bw" 2>/dev/null |
    awk '{ zl=$2; vl=$5; zb=$8; vb=$11; err=$3+$6+$9+$12;
           printf "%10s | %12.2f %12.2f %7.2f | %12.2f %12.2f %7.2f | %d\n",
                  $1, zl, vl, (vl>0? zl/vl : 0), zb, vb, (vb>0? zb/vb : 0), err }'
}
join_cols
errs=$(cat "$tmp"/*.lat "$tmp"/*.bw 2>/dev/null | awk '{s+=$3} END {print s+0}')
echo "(latency ratio < 1 and bandwidth ratio > 1 favour rc_zv; under emulation only ratios mean anything)"
[ "$errs" = 0 ] || { echo "DATA ERRORS: $errs"; status=1; }
exit $status
