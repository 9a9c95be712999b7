#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two rails: a guest with two NICs, rxe0 on eth0 and rxe1 on eth1
# (contrib/vm/run.sh --nics 2; test/device/run-tier.sh runs it so), MPI
# jobs of 2 ranks over both devices (UCX_NET_DEVICES=rxe0:1,rxe1:1,
# UCX_MAX_RNDV_RAILS=2), UCX's rc_verbs first in the same conditions:
#  - striping: 1..4 MiB ping-pong, data validated; both devices' sent
#    packet counters (rdma statistic) must have grown, each by at least a
#    quarter of the total (UCP splits rendezvous between the rails);
#  - losing a rail: eth1 goes down 5 s into 30 s of checked traffic (up
#    to 4 MiB) and stays down until the job has ended; the job must end
#    within ZV_RAIL_LIMIT s (default 120) of the loss, with success and its
#    data intact, or with a clear error naming the transport, never hang;
#    then eth1 comes back.
# With two NUMA nodes, eth0 on node 0 and eth1 on node 1 (run.sh --numa 2,
# as run-tier.sh runs it), first the locality of a two-socket node with a
# NIC per socket (rxe has no PCI function: it is where its NIC is):
#  - ucx_info -d gives each zv device its NIC's system device, and a
#    process on CPU 0 sees the far device (rxe1) with more latency;
#  - a rank's receive and send pools (rc_zv, uc_zv, ud_zv over both rails)
#    have their pages on each device's NUMA node (/proc/PID/numa_maps);
#  - both jobs pair the rails by reachability: a device's peer on the
#    other rail's network is not reachable (ibv_create_ah() would fail).
# (Bandwidth over two rails against one is a benchmark, not a test.)
#
# usage (standalone, in such a guest): ZV_BUILDDIR=B ZV_SRCDIR=S test/device/rails-tests.sh
# Environment: ZV_RAILS_TLS (default "rc_zv uc_zv"), ZV_RAIL_LIMIT.
. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"

rt_start=$(date +%s)
if ! ibv_devices | grep -qw rxe1; then
    echo "FAIL: rails: no second device (rxe1): run in a guest with two NICs (run.sh --nics 2)"
    fail=$((fail + 1))
    [ -z "${suite_standalone:-}" ] || { echo "rails: $pass passed, $fail failed"; exit 1; }
    return 1 2>/dev/null || exit 1
fi
rt_limit=${ZV_RAIL_LIMIT:-120}
rt_sent() { rdma statistic show link "$1/1" | sed -n 's/.* sent_pkts \([0-9]*\).*/\1/p'; }
rt_run() { # tls program-and-args...: 2 ranks over both devices
    local tl=$1; shift
    timeout 300 mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_tls "$tl" \
        --mca pml_ucx_devices 'rxe*' -x UCX_TLS="$tl,self" -x UCX_NET_DEVICES=rxe0:1,rxe1:1 \
        -x UCX_MAX_RNDV_RAILS=2 -x UCX_UD_VERBS_ETH_DGID_CHECK=n "$@"
}
rt_active() { # wait (up to 60 s) until rxe1's port is active again
    for _ in $(seq 120); do
        grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null && return 0
        sleep 0.5
    done
    return 1
}

if [ -d /sys/devices/system/node/node1 ]; then
    echo "---- locality: NUMA node 0 with eth0 (rxe0), node 1 with eth1 (rxe1)"
    rt_info() { # device transport field: one ucx_info -d field, on CPU 0
        awk -v d="$1" -v t="$2" -v f="$3" '
            /Transport:/ { tl = $NF } /Device:/ { dev = $NF }
            tl == t && dev == d && index($0, f ":") { sub(/^.*: */, ""); print; exit }' "$ms_dir/info0"
    }
    LD_PRELOAD=$b/.libs/libuct_zv.so.0 taskset -c 0 ucx_info -d > "$ms_dir/info0" 2>&1
    for rt_d in rxe0 rxe1; do
        echo "  $rt_d: rc_zv system device '$(rt_info $rt_d:1 rc_zv 'System device')'," \
             "latency $(rt_info $rt_d:1 rc_zv latency); rc_verbs '$(rt_info $rt_d:1 rc_verbs 'System device')'," \
             "latency $(rt_info $rt_d:1 rc_verbs latency)"
        for rt_tl in ${ZV_RAILS_TLS:-rc_zv uc_zv} ud_zv; do
            check "locality: $rt_tl on $rt_d reports its NIC as system device" \
                test "$(rt_info $rt_d:1 $rt_tl 'System device')" = "$rt_d (${rt_d#rxe})"
        done
    done
    rt_lat0=$(rt_info rxe0:1 rc_zv latency) rt_lat1=$(rt_info rxe1:1 rc_zv latency)
    check "locality: on CPU 0 the far device is slower ($rt_lat1 against $rt_lat0)" \
        test "${rt_lat1%% *}" -gt "${rt_lat0%% *}"
    for rt_tl in ${ZV_RAILS_TLS:-rc_zv uc_zv} ud_zv; do
        timeout 120 mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_tls any \
            --mca pml_ucx_devices any -x LD_PRELOAD="$b/.libs/libuct_zv.so.0" \
            -x UCX_TLS="$rt_tl,self" -x UCX_NET_DEVICES=rxe0:1,rxe1:1 -x UCX_MAX_RNDV_RAILS=2 \
            "$ms_t/zv_soak" -d 8 -S 1048576 > "$ms_dir/numa" 2>&1 &
        rt_mp=$!
        # Read while the soak runs (8 s once the ranks are set up, which on
        # a loaded host takes more than a few seconds): until both ranks
        # have pages on both nodes, or the job ends; the best reading counts.
        rt_pages='' rt_good=0
        for _ in $(seq 60); do
            sleep 1
            rt_now='' rt_n=0
            for rt_p in $(pgrep -x zv_soak); do
                # Pages under a policy of node N that sit on node N.
                rt_x=$(awk '/:0 .*N0=/ { sub(/.*N0=/, ""); n0 += $1 }
                            /:1 .*N1=/ { sub(/.*N1=/, ""); n1 += $1 }
                            END { printf "%d/%d", n0, n1 }' "/proc/$rt_p/numa_maps" 2>/dev/null)
                rt_now+=" $rt_x"
                [ "${rt_x%/*}" -gt 0 ] 2>/dev/null && [ "${rt_x#*/}" -gt 0 ] && rt_n=$((rt_n + 1))
            done
            [ $rt_n -lt $rt_good ] || [ -z "$rt_now" ] || { rt_pages=$rt_now; rt_good=$rt_n; }
            [ $rt_good -lt 2 ] && kill -0 $rt_mp 2>/dev/null || break
        done
        wait $rt_mp; rt_rc=$?
        echo "  $rt_tl: exit $rt_rc; pages bound to and on node 0/node 1, per rank:$rt_pages"
        [ $rt_rc = 0 ] || grep -m 3 -E "ERROR|Error" "$ms_dir/numa" | sed 's/^/    /'
        check "locality: $rt_tl over both rails: data intact" \
            bash -c "[ $rt_rc = 0 ] && grep -qE '^soak: .* 0 errors' '$ms_dir/numa'"
        check "locality: $rt_tl: both ranks' buffers on both devices' nodes ($rt_pages )" \
            test $rt_good = 2
    done
fi

echo "---- two rails: rxe0 (eth0) and rxe1 (eth1)"
for rt_tl in rc_verbs ${ZV_RAILS_TLS:-rc_zv uc_zv}; do
    [ "$rt_tl" = rc_verbs ] || grep -q "Transport: $rt_tl\$" "$ms_dir/tls" || continue
    rt_use=$rt_tl; [ "$rt_tl" != rc_verbs ] || rt_use=rc_verbs,ud_verbs
    rt_a0=$(rt_sent rxe0) rt_b0=$(rt_sent rxe1)
    rt_run "$rt_use" "$ms_t/zv_osu" -t lat -s 1048576 -S 4194304 -i 20 > "$ms_dir/rails" 2>&1
    rt_rc=$?
    rt_a=$(( $(rt_sent rxe0) - rt_a0 )) rt_b=$(( $(rt_sent rxe1) - rt_b0 ))
    echo "  $rt_tl: ping-pong 1..4 MiB exit $rt_rc; sent packets rxe0 $rt_a, rxe1 $rt_b"
    [ $rt_rc = 0 ] || tail -n 3 "$ms_dir/rails" | sed 's/^/    /'
    if [ "$rt_tl" != rc_verbs ]; then
        check "two rails over $rt_tl: 1..4 MiB ping-pong, data intact" test $rt_rc = 0
        check "two rails over $rt_tl: each rail carried at least a quarter ($rt_a, $rt_b packets)" \
            test $((4 * rt_a)) -ge $((rt_a + rt_b)) -a $((4 * rt_b)) -ge $((rt_a + rt_b)) -a $rt_a -gt 0
    fi

    # ---- a rail lost under traffic (eth1 down; eth0 stays)
    rt_run "$rt_use" "$ms_t/zv_soak" -d 30 -S 4194304 > "$ms_dir/rail-loss" 2>&1 &
    rt_mp=$!
    sleep 5
    rt_d=$(date +%s.%N)
    ip link set eth1 down
    for _ in $(seq $((rt_limit * 10))); do kill -0 $rt_mp 2>/dev/null || break; sleep 0.1; done
    if kill -0 $rt_mp 2>/dev/null; then
        rt_rc=hang; kill -9 $rt_mp 2>/dev/null; pkill -9 -x zv_soak
    else
        wait $rt_mp; rt_rc=$?
    fi
    rt_e=$(date +%s.%N)
    ip link set eth1 up
    rt_active; rt_up=$?
    rt_why=$(grep -m 1 -E "rxe[0-9]*: (rc|ud|uc)_zv|Fatal:|UCX +ERROR|[Ee]rror" "$ms_dir/rail-loss" |
             sed 's/^.*\] *//; s/^ *//' | cut -c1-150)
    echo "  $rt_tl: rail rxe1 lost under traffic: exit $rt_rc," \
         "$(echo "$rt_e $rt_d" | awk '{printf "%.1f s after eth1 went down", $1 - $2}')"
    echo "    ${rt_why:-(no error printed)}"
    grep -m 1 '^soak:' "$ms_dir/rail-loss" | sed 's/^/    /'
    pgrep -x zv_soak > /dev/null && pkill -9 -x zv_soak
    [ "$rt_tl" != rc_verbs ] || continue   # the peer: printed beside, not judged
    check "rail lost over $rt_tl: the job ends within $rt_limit s" \
        bash -c "[[ '$rt_rc' =~ ^[0-9]+\$ ]]"
    check "rail lost over $rt_tl: success with data intact, or a clear error naming the transport" \
        bash -c "[ '$rt_rc' = 0 ] && grep -qE '^soak: .* 0 errors' '$ms_dir/rail-loss' ||
                 grep -qE 'rxe[0-9]*: $rt_tl' '$ms_dir/rail-loss'"
    check "rail back over $rt_tl: rxe1's port is active again" test $rt_up = 0
done
echo "rails: $(( $(date +%s) - rt_start )) s"
if [ -n "${suite_standalone:-}" ]; then
    echo "rails: $pass passed, $fail failed"
    [ $fail = 0 ]
fi
