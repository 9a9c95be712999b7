#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two-host stage of the device tier: MPI across two Soft-RoCE VMs joined by a virtual wire (contrib/vm/run2.sh), clean, with loss, and with a peer killed.
#
# Usage: two-host-tests.sh            on the host (run-tier.sh runs it)
#        two-host-tests.sh --guest    inside zv-a (run2.sh starts it)
#
# On the host: run2.sh's own checks (exit status and arguments, timeout,
# SIGTERM, no qemu left behind), then one two-VM boot that runs the guest
# part. The guest part: names, ssh, rxe0 and its GID on both VMs, make
# install on both, one rank per VM, then for each transport validated
# ping-pong and bandwidth (zv_osu checks every receive) clean and with
# netem loss on both NICs, rxe hardware counters on both VMs proving the
# traffic crossed the wire; last, VM b is killed mid-transfer and mpirun
# on zv-a must fail within a bounded time.
#
# Environment: ZV_BUILDDIR, ZV_SRCDIR (as device-tests.sh);
#   ZV_TWO_HOST_TLS    transports to run (default: rc_verbs and every *_zv
#                      transport ucx_info lists on rxe0)
#   ZV_TWO_HOST_FULL=1 the long run: sizes to 4 MiB, more iterations,
#                      2 % loss, reordering and duplication too, and 5 % for
#                      ud_zv and uc_zv (tens of minutes); bandwidth under
#                      faults to 1 MiB, 256 KiB for rc_* (rxe's RC retry
#                      stalls on each lost packet)
#   ZV_SOAK_SECONDS    soak length per transport (default 15 s, 600 s full)
#   ZV_TWO_HOST_TIMEOUT  the two-VM boot's limit (default 1200 s, 7200 s full)
#   ZV_TWO_HOST_PARTS  which parts run after the setup checks (default
#                      "wire soak coll8 busy cut kill"; cut only in the full
#                      run; coll8: 8 ranks, 4 per VM, collectives; busy: a
#                      rank computing ZV_BUSY_SECONDS, default 45, in each
#                      run of ZV_BUSY_RUNS, RANKS:MODE..., default 4:mixed,
#                      MODE as busy-suite.sh's ZV_BUSY_MODE): e.g.
#                      ZV_TWO_HOST_PARTS=soak ZV_SOAK_SECONDS=600 is the
#                      10-minute soak alone
# Prints "ok   - ..." / "FAIL - ..." / "skip - ..." lines and ends with
# "two-host: N passed, M failed, K skipped"; exit status 1 on any failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
full=${ZV_TWO_HOST_FULL:-0}
parts=" ${ZV_TWO_HOST_PARTS:-wire soak coll8 busy cut kill} "
part() { case $parts in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
pass=0 fail=0 skip=0
ok()   { pass=$((pass + 1)); echo "ok   - $*"; }
bad()  { fail=$((fail + 1)); echo "FAIL - $*"; }
skip() { skip=$((skip + 1)); echo "skip - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ============================================================== guest part
guest() {
    local b=${ZV_BUILDDIR:?} stage=${ZV_TWO_HOST_STAGED:?}
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    local mod=$b/.libs/libuct_zv.so.0 peer=zv-b t
    g0=$(now)
    hdr() { echo "== $* [$(since "$g0") s]"; }
    hdr "two hosts: $(hostname) and $peer"
    check "hostname is zv-a" [ "$(hostname)" = zv-a ]
    check "ssh $peer: hostname is $peer" [ "$(ssh $peer hostname 2>&1)" = $peer ]
    check "ssh from $peer back to zv-a" [ "$(ssh $peer ssh zv-a hostname 2>&1)" = zv-a ]
    check "ulimit -l unlimited in ssh sessions" [ "$(ssh $peer 'ulimit -l')" = unlimited ]
    local h ip idx
    for h in zv-a $peer; do
        # rxe has 1024 GID slots: one grep, not a process per slot.
        ssh "$h" 'p=/sys/class/infiniband/rxe0/ports/1; ip=$(getent hosts $(hostname) | cut -d" " -f1)
            echo "state=$(cut -d" " -f2 $p/state)"; echo "ip=$ip"
            hex=$(printf "%02x%02x:%02x%02x" $(echo $ip | tr . " "))
            for g in $(grep -l "^0000:0000:0000:0000:0000:ffff:$hex\$" $p/gids/*); do
                i=${g##*/}; echo "gid=$i $(tr " " _ <$p/gid_attrs/types/$i)"
            done' >"$tmp/port.$h" 2>&1
        check "$h: rxe0 port 1 ACTIVE" grep -qx 'state=ACTIVE' "$tmp/port.$h"
        idx=$(sed -n 's/^gid=\([0-9]*\) .*/\1/p' "$tmp/port.$h" | head -n1)
        ip=$(sed -n 's/^ip=//p' "$tmp/port.$h")
        echo "   $h: ::ffff:$ip is GID index ${idx:-none} ($(sed -n 's/^gid=[0-9]* //p' "$tmp/port.$h" | head -n1))"
        check "$h: a RoCE v2 GID holds ::ffff:$ip" grep -q '^gid=[0-9]* RoCE_v2' "$tmp/port.$h"
    done
    idx=$(sed -n 's/^gid=\([0-9]*\) .*/\1/p' "$tmp/port.zv-a" | head -n1)
    # One ucx_info (~10 s under emulation): the md's GID and the transports.
    LD_PRELOAD=$mod UCX_LOG_LEVEL=debug ucx_info -d >"$tmp/ucx_info" 2>&1
    check "zv md picks GID index ${idx:-?} by itself (UCX_ZV_GID_INDEX=auto)" \
        grep -q "zv_md.cc.*rxe0:1.*gid\[${idx:-x}\]" "$tmp/ucx_info"

    # ---- zverbs' Open MPI component on both VMs (each root is its own
    # overlay): what the host's "make install DESTDIR=..." staged, copied
    # in (make install itself takes ~1 min a VM under emulation). No
    # ldconfig (~17 s): the component opens the module by its full path.
    t=$(now)
    if [ -d "$stage/usr" ] && cp -a "$stage/." / &&
       ssh $peer "cp -a '$stage/.' /" >"$tmp/install.b" 2>&1; then
        ok "zverbs installed on zv-a and $peer ($(since "$t") s)"
        # Open MPI 5's mpirun hands every rank PMIx's component directory
        # (README, Selecting zverbs): name Open MPI's own for each mpirun.
        eval "$("$here/../../contrib/ompi-rank-path.sh" --env)"
    else
        cat "$tmp/install.b" 2>/dev/null
        bad "zverbs installed on zv-a and $peer (from $stage)"
        return
    fi
    # (ompi_info would take ~1 min a VM; the rc_zv runs below prove the
    # component brings the module into ranks on both VMs.)
    local comp
    comp=$(cd "$stage" && find . -name mca_rcache_zverbs.so | cut -c2- | head -n1)
    check "Open MPI component ${comp:-mca_rcache_zverbs.so} in place on zv-a and $peer" \
        sh -c "[ -n '$comp' ] && [ -f '$comp' ] && ssh $peer test -f '$comp'"

    local mpirun=(mpirun --allow-run-as-root -np 2 --host "zv-a,$peer")
    "${mpirun[@]}" hostname >"$tmp/where" 2>&1
    check "mpirun -np 2 --host zv-a,$peer: one rank on each VM" \
        [ "$(sort "$tmp/where" | tr '\n' ' ')" = "zv-a $peer " ]

    # ---- transports: the mpirun arguments that select each (one line each)
    local tls
    if [ -n "${ZV_TWO_HOST_TLS:-}" ]; then
        tls=$ZV_TWO_HOST_TLS
    else
        tls="rc_verbs $(awk '$(NF-1) == "Transport:" && $NF ~ /_zv$/ {print $NF}' "$tmp/ucx_info" |
                        sort -u | tr '\n' ' ')"
    fi
    hdr "transports: $tls"
    tl_args() {
        case $1 in
            rc_verbs) echo "--mca pml_ucx_tls rc_verbs -x UCX_TLS=rc_verbs,ud_verbs,self
                            -x UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
            *_zv)     echo "--mca pml_ucx_tls $1 -x UCX_TLS=$1,self" ;;
            *)        return 1 ;;
        esac
    }

    # CI: every mpirun costs ~10 s to start under emulation, so few runs:
    # ping-pong and bandwidth clean, bandwidth with 1 % loss. Faults are
    # zv-wire netem settings, applied to both NICs.
    local lat_max=4096 lat_iters=50 bw_max=1048576 bw_iters=10 limit=120
    local faults=("loss 1%") fault_tests=bw fault_lat_max=1024 fault_bw_max=65536 fault_iters=20
    if [ "$full" = 1 ]; then
        lat_max=65536 lat_iters=500 bw_max=4194304 bw_iters=50 limit=900
        faults=("loss 1%" "loss 2%" "dup 1% reorder 10%") fault_tests="lat bw"
        fault_lat_max=65536 fault_bw_max=1048576 fault_iters=20
    fi

    counters() { # -> "a_sent a_rcvd b_sent b_rcvd"
        local c=/sys/class/infiniband/rxe0/ports/1/hw_counters
        echo "$(cat $c/sent_pkts) $(cat $c/rcvd_pkts) $(ssh $peer "cat $c/sent_pkts $c/rcvd_pkts" | tr '\n' ' ')"
    }
    # osu NAME TL TEST MIN MAX ITERS: validated zv_osu across the wire; the
    # counter deltas land in $tmp/NAME.cnt.
    osu() {
        local name=$1 tl=$2 test=$3 min=$4 max=$5 iters=$6 rc c0 c1 t
        c0=$(counters); t=$(now)
        # shellcheck disable=SC2046  # tl_args prints words
        timeout -k 10 $limit "${mpirun[@]}" --mca pml ucx --mca pml_ucx_devices rxe0 \
            -x UCX_NET_DEVICES=rxe0:1 $(tl_args "$tl") \
            "$b/mpi-tests/zv_osu" -t "$test" -s "$min" -S "$max" -i "$iters" -q \
            >"$tmp/$name" 2>"$tmp/$name.err"
        rc=$?
        c1=$(counters)
        echo "$c0 $c1" | awk '{print $5-$1, $6-$2, $7-$3, $8-$4}' >"$tmp/$name.cnt"
        echo "   $name: $(since "$t") s, exit $rc, packets a->b $(awk '{print $1 "/" $4}' "$tmp/$name.cnt")" \
             "b->a $(awk '{print $3 "/" $2}' "$tmp/$name.cnt") (sent/received)"
        [ $rc = 0 ] || { tail -n 5 "$tmp/$name.err"; [ $rc != 124 ] || echo "   (timed out after $limit s)"; }
        return $rc
    }
    # Figures of a run ("size value errors" lines): 8 B (or the first) and the last size.
    figures() {
        awk -v u="$2" 'NF == 3 { l = $1 " B " $2 " " u; if (!f || $1 == 8) f = l } END { print f "; " l }' "$1"
    }
    crossed() { # NAME MIN_PACKETS: both directions carried traffic, counted on both ends
        awk -v m="$2" '{ exit !($1 >= m && $4 >= m && $3 >= m && $2 >= m) }' "$tmp/$1.cnt"
    }

    local tl test fault name rc mp
    part wire || echo "   (part 'wire' not selected: ZV_TWO_HOST_PARTS=$parts)"
    for tl in $(part wire && echo "$tls"); do
        tl_args "$tl" >/dev/null || { skip "$tl: no mpirun arguments known for it"; continue; }
        hdr "$tl, clean wire"
        for test in lat bw; do
            name=$tl.$test.clean
            rc=0
            if [ $test = lat ]; then osu $name $tl lat 1 $lat_max $lat_iters || rc=$?
            else osu $name $tl bw 1 $bw_max $bw_iters || rc=$?; fi
            check "$tl $test across the wire, data validated" [ $rc = 0 ]
            echo "   $(figures "$tmp/$name" "$([ $test = lat ] && echo us || echo MB/s)")"
            check "$tl $test: rxe counters on both VMs show the traffic crossed (>= 100 packets each way)" \
                crossed $name 100
            # Lossless: the counts agree (to 0.1 %: the four reads are not
            # one snapshot).
            check "$tl $test: lossless wire, packets sent = packets received" \
                awk '{ d1 = $1 - $4; d2 = $3 - $2; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2
                       exit !(d1 <= 2 + $1 / 1000 && d2 <= 2 + $3 / 1000) }' "$tmp/$name.cnt"
        done
        local tl_faults=("${faults[@]}")
        # The software-reliable transports also at 5 % (issue: 1 % and 5 %
        # loss, duplication and reordering); the HCA's retry is not at stake.
        case "$full $tl" in "1 ud_zv"|"1 uc_zv") tl_faults+=("loss 5%" "dup 5% reorder 5%") ;; esac
        # rxe's RC retransmission stalls on every lost packet (1 MiB
        # windows with 1 % loss: 0.09 MB/s, 799 s, for rc_zv as for
        # rc_verbs): the HCA-reliable transports stream 256 KiB at most.
        local tl_bw_max=$fault_bw_max
        case $tl in rc_*) [ "$tl_bw_max" -le 262144 ] || tl_bw_max=262144 ;; esac
        for fault in "${tl_faults[@]}"; do
            hdr "$tl, netem $fault on both NICs"
            # shellcheck disable=SC2086  # netem words
            zv-wire both $fault || bad "zv-wire both $fault"
            for test in $fault_tests; do
                name=$tl.$test.${fault// /}
                rc=0
                if [ $test = lat ]; then osu $name $tl lat 1 $fault_lat_max $fault_iters || rc=$?
                else osu $name $tl bw 1 $tl_bw_max $fault_iters || rc=$?; fi
                check "$tl $test with $fault, data validated" [ $rc = 0 ]
                echo "   $(figures "$tmp/$name" "$([ $test = lat ] && echo us || echo MB/s)")"
                case "$fault" in loss*)
                    check "$tl $test with $fault: packets were lost and recovered" \
                        awk '{ exit !($1 > $4 || $3 > $2) }' "$tmp/$name.cnt" ;;
                esac
            done
            zv-wire both show | sed 's/^/   /' | cut -c1-160
            zv-wire both clear
        done
    done

    # ---- soak: mixed traffic (messages of every size from reused and fresh
    # buffers, allreduce, one-sided put/get) with 1 % loss on both NICs,
    # every byte checked, resident memory growth bounded (zv_soak -g)
    local soak=${ZV_SOAK_SECONDS:-$([ "$full" = 1 ] && echo 600 || echo 15)}
    part soak && { zv-wire both loss 1% || bad "zv-wire both loss 1%"; }
    for tl in $(part soak && echo "$tls"); do
        tl_args "$tl" >/dev/null || continue
        # UCX's rc_verbs, the peer, soaks in the full run only
        [ "$tl" != rc_verbs ] || [ "$full" = 1 ] || continue
        hdr "$tl: soak, $soak s of mixed traffic with loss 1% on both NICs"
        t=$(now); c0=$(counters)
        # shellcheck disable=SC2046
        timeout -k 10 $((soak + 180)) "${mpirun[@]}" --mca pml ucx --mca pml_ucx_devices rxe0 \
            --mca osc ucx -x UCX_NET_DEVICES=rxe0:1 $(tl_args "$tl") \
            "$b/mpi-tests/zv_soak" -d "$soak" -r >"$tmp/soak.$tl" 2>&1
        rc=$?
        c1=$(counters)
        echo "   exit $rc after $(since "$t") s; $(grep '^soak:' "$tmp/soak.$tl")"
        echo "   packets a->b $(echo "$c0 $c1" | awk '{print $5-$1 "/" $8-$4}') (sent/received)"
        [ $rc = 0 ] || tail -n 8 "$tmp/soak.$tl"
        check "$tl soak with loss 1%: zero errors, resident memory bounded" [ $rc = 0 ]
    done
    zv-wire both clear

    # ---- more ranks than cores (correctness only, never timed): 8 ranks,
    # 4 on each VM (--oversubscribe), the collectives of zv_coll 1 B..16 KiB
    # data validated, over rc_zv,ud_zv: with UCX_NUM_EPS=4096 UCP must take
    # ud_zv for the peers (rc_zv's max_num_eps is below), and with the job's
    # own size rc_zv. The lanes are read from UCP's ep_cfg lines.
    if part coll8 && case " $tls " in *" rc_zv "*) true ;; *) false ;; esac &&
       case " $tls " in *" ud_zv "*) true ;; *) false ;; esac; then
        local neps want
        for neps in 4096 8; do
            want=$([ $neps = 4096 ] && echo ud_zv || echo rc_zv)
            hdr "8 ranks (4 + 4), collectives over rc_zv,ud_zv, UCX_NUM_EPS=$neps"
            t=$(now)
            timeout -k 10 600 mpirun --allow-run-as-root -np 8 --host "zv-a:4,$peer:4" \
                --oversubscribe --mca pml ucx --mca pml_ucx_devices rxe0 \
                --mca pml_ucx_tls rc_zv,ud_zv -x UCX_TLS=rc_zv,ud_zv,self \
                -x UCX_NET_DEVICES=rxe0:1 -x UCX_NUM_EPS=$neps -x UCX_LOG_LEVEL=info \
                "$b/mpi-tests/zv_coll" -t all -S 16384 -i 2 >"$tmp/coll8.$neps" 2>&1
            rc=$?
            echo "   exit $rc after $(since "$t") s; $(grep -c 'ep_cfg\[[0-9]*\]: tag(' "$tmp/coll8.$neps") ep configs:" \
                 "$(grep -o 'ep_cfg\[[0-9]*\]: tag([^)]*)' "$tmp/coll8.$neps" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
            [ $rc = 0 ] || tail -n 8 "$tmp/coll8.$neps"
            check "8 ranks over two VMs, UCX_NUM_EPS=$neps: collectives data validated" [ $rc = 0 ]
            check "8 ranks, UCX_NUM_EPS=$neps: UCP's remote endpoints use $want" \
                sh -c "grep -o 'ep_cfg\[[1-9][0-9]*\]: tag([^)]*)' '$tmp/coll8.$neps' | grep -q '$want' &&
                       ! grep -o 'ep_cfg\[[1-9][0-9]*\]: tag([^)]*)' '$tmp/coll8.$neps' |
                         grep -q '$([ $want = ud_zv ] && echo rc_zv || echo ud_zv)'"
        done
    fi

    # ---- a rank that computes (mpi-tests/zv_busy, as test/device/busy-suite.sh
    # runs it in one VM): per run of ZV_BUSY_RUNS (RANKS:MODE..., default
    # 4:mixed), the ranks split over the two VMs, the last one on zv-b makes
    # no MPI call for ZV_BUSY_SECONDS while the others send to it (cold,
    # warm or mixed) and wait for it in an allreduce. The transports side
    # by side (waiting jobs, not timed), and UCX's rc_verbs,ud_verbs beside
    # them: the peer, printed, not a check of ours.
    if part busy; then
        local busy=${ZV_BUSY_SECONDS:-45} brun bnp bmode btl bpids bt
        for brun in ${ZV_BUSY_RUNS:-4:mixed}; do
            bnp=${brun%%:*} bmode=${brun#*:} bpids=()
            hdr "a rank on $peer computes $busy s while $((bnp - 1)) send to it ($bmode)"
            t=$(now)
            for btl in $tls rc_zv,ud_zv rc_verbs,ud_verbs; do
                local bx=() # (rxe: ud_verbs needs its DGID check off)
                [ "$btl" != rc_verbs,ud_verbs ] || bx=(-x UCX_UD_VERBS_ETH_DGID_CHECK=n)
                case $btl in rc_verbs) continue ;; rc_zv,ud_zv)
                    # (both listed; one pattern for both would need a space
                    # between them, which " rc_zv " has taken)
                    case " $tls " in *" rc_zv "*) ;; *) continue ;; esac
                    case " $tls " in *" ud_zv "*) ;; *) continue ;; esac ;; esac
                timeout -k 10 $((busy + 300)) mpirun --allow-run-as-root -np "$bnp" \
                    --host "zv-a:$((bnp / 2)),$peer:$((bnp - bnp / 2))" \
                    --mca pml ucx --mca pml_ucx_devices rxe0 -x UCX_NET_DEVICES=rxe0:1 \
                    --mca pml_ucx_tls "$btl" -x UCX_TLS="$btl,self" "${bx[@]}" \
                    "$b/mpi-tests/zv_busy" -s "$busy" -w read -m "$bmode" >"$tmp/busy.$btl" 2>&1 &
                bpids+=("$!:$btl")
            done
            for bt in "${bpids[@]}"; do
                rc=0; wait "${bt%%:*}" || rc=$?
                btl=${bt#*:}
                echo "   $btl: exit $rc; $(grep '^busy:' "$tmp/busy.$btl")"
                [ $rc = 0 ] || tail -n 8 "$tmp/busy.$btl"
                [ "$btl" = rc_verbs,ud_verbs ] && continue # (the peer)
                check "$btl across two VMs, $bnp ranks, one computing $busy s ($bmode): exit 0, data validated" \
                    sh -c "[ $rc = 0 ] && grep -q '^busy: .*: 0 errors' '$tmp/busy.$btl'"
            done
            echo "   ($(since "$t") s)"
        done
    fi

    # ---- full run: the wire is cut for 5 s mid-run (less than the ssh and
    # Open MPI keep-alives allow); the job must ride it out
    if [ "$full" = 1 ] && part cut; then
        local ctl
        for ctl in $tls; do
            hdr "$ctl: the wire cut for 5 s during a ping-pong"
            t=$(now)
            # shellcheck disable=SC2046
            timeout -k 10 $limit "${mpirun[@]}" --mca pml ucx --mca pml_ucx_devices rxe0 \
                -x UCX_NET_DEVICES=rxe0:1 $(tl_args "$ctl") \
                "$b/mpi-tests/zv_osu" -t lat -s 8 -S 8 -i 6000 -q >"$tmp/cut.$ctl" 2>&1 &
            mp=$!
            sleep 20
            zv-wire cut 5
            rc=0; wait $mp || rc=$?
            echo "   exit $rc after $(since "$t") s; $(figures "$tmp/cut.$ctl" us)"
            [ $rc = 0 ] || tail -n 5 "$tmp/cut.$ctl"
            check "$ctl rides out a 5 s cut of the wire, data validated" [ $rc = 0 ]
        done
    fi

    # ---- the peer dies mid-transfer: the survivor must fail, in bounded time
    part kill || { echo "guest: $pass passed, $fail failed, $skip skipped [$(since "$g0") s]"; [ $fail = 0 ]; return; }
    local ktl=rc_zv bound=60 mp
    case " $tls " in *" rc_zv "*) ;; *) ktl=${tls%% *} ;; esac
    hdr "$peer killed during a $ktl bandwidth run"
    c0=$(counters)
    t=$(now)
    # shellcheck disable=SC2046
    timeout -k 10 300 "${mpirun[@]}" --mca pml ucx --mca pml_ucx_devices rxe0 \
        -x UCX_NET_DEVICES=rxe0:1 $(tl_args "$ktl") \
        "$b/mpi-tests/zv_osu" -t bw -s 65536 -S 65536 -i 100000 -q >"$tmp/kill" 2>&1 &
    mp=$!
    # Kill once data flows: b has received 2000 more packets.
    local flowing=0 c
    for _ in $(seq 1 120); do
        c=$(ssh $peer cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts 2>/dev/null)
        [ -n "$c" ] && [ "$c" -ge $(( $(echo "$c0" | cut -d' ' -f4) + 2000 )) ] && { flowing=1; break; }
        kill -0 $mp 2>/dev/null || break
        sleep 0.5
    done
    check "$ktl bandwidth run is moving data before the kill ($(since "$t") s after mpirun)" [ $flowing = 1 ]
    t=$(now)
    zv-wire kill b | sed 's/^/   /'
    # The survivor rank (zv_osu here) must end in bounded time. mpirun
    # itself may then wait for the lost node's daemon: Open MPI 4.1's
    # runtime, once a rank has exited with an error, waits for every
    # daemon to confirm the abort (rc_verbs with a finite retry count does
    # the same; on rxe its default of 7 retries forever, so its rank never
    # fails and the runtime's own loss detection ends the job first).
    local took= gone=0
    for _ in $(seq $((bound * 5))); do
        pgrep -x zv_osu > /dev/null || { gone=1; break; }
        sleep 0.2
    done
    took=$(since "$t")
    for _ in $(seq 150); do kill -0 $mp 2>/dev/null || break; sleep 0.2; done
    rc=0
    if kill -0 $mp 2>/dev/null; then
        rc=waiting; kill $mp 2>/dev/null; wait $mp
    else
        wait $mp || rc=$?
    fi
    echo "   survivor rank $([ $gone = 1 ] && echo "gone $took s" || echo "still there $took s") after $peer was killed;" \
         "mpirun: $([ $rc = waiting ] && echo "still waiting for $peer's daemon 30 s later (killed)" || echo "exit $rc, $(since "$t") s"); its last words:"
    grep -m 1 -E 'rxe[0-9]*: (rc|ud|uc)_zv|send completion with error' "$tmp/kill" | cut -c1-200 | sed 's/^/   | /'
    grep -vE '^ *[0-9]+ +[0-9.]+ +[0-9]+$|^-+$|^$|\] *\[ *[0-9]+\] ' "$tmp/kill" | tail -n 6 | cut -c1-200 | sed 's/^/   | /'
    check "the survivor rank ends within $bound s when $peer dies mid-transfer (took $took s)" [ $gone = 1 ]
    check "mpirun does not report success (exit $rc)" [ "$rc" != 0 ]
    check "the survivor reports an error" grep -qiE 'error|lost|abort|failed|terminat' "$tmp/kill"

    echo "guest: $pass passed, $fail failed, $skip skipped [$(since "$g0") s]"
    [ $fail = 0 ]
}

if [ "${1:-}" = --guest ]; then
    shift
    # run2.sh's own checks: arguments verbatim, stderr apart from stdout.
    printf 'arguments:'; printf ' [%s]' "$@"; echo
    echo "a line on stderr" >&2
    guest
    exit $?
fi

# =============================================================== host part
run2=$here/../../contrib/vm/run2.sh
b=${ZV_BUILDDIR:?}
src=${ZV_SRCDIR:-$(cd "$here/../.." && pwd)}
start=$SECONDS
dir=$(mktemp -d "${TMPDIR:-/tmp}/zverbs-two-host.XXXXXX")
bg=''
cleanup() {
    local p
    for p in $bg; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The qemu processes under a process (run2.sh -> run.sh -> qemu), from /proc.
qemus_under() {
    local f pid comm _st ppid rest
    local -A kids=() name=()
    for f in /proc/[0-9]*/stat; do
        { read -r pid comm _st ppid rest <"$f"; } 2>/dev/null || continue
        kids[$ppid]+=" $pid"; name[$pid]=$comm
    done
    local todo=$1 p
    while [ -n "$todo" ]; do
        set -- $todo; p=$1; shift; todo="$*"
        todo+="${kids[$p]:-}"
        [ "${name[$p]:-}" = "${name[$p]#(qemu-system}" ] || echo "$p"
    done
}
wait_qemus() { # PID N: wait until PID has N qemu descendants; print them
    local q
    for _ in $(seq 1 900); do
        q=$(qemus_under "$1" | tr '\n' ' ')
        [ "$(echo $q | wc -w)" -lt "$2" ] || { echo "$q"; return 0; }
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
gone() { # PIDS...: there were some, and none is left
    [ $# -gt 0 ] || return 1
    local p; for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done
}

echo "== run2.sh: timeout and SIGTERM (two runs at once)"
t=$SECONDS
# From $dir: the VM enters the current directory, and only shared ones
# (or the host's outside /tmp) are visible there.
(cd "$dir" && exec "$run2" --share "$dir" --timeout 30 -- sleep 1000) >"$dir/tmo.out" 2>"$dir/tmo.err" &
tpid=$!; bg=$tpid
t0=$(now)
# When it ends (it is not waited for until the exit status check is done).
( while kill -0 $tpid 2>/dev/null; do sleep 0.2; done; since "$t0" >"$dir/tmo.took" ) &
bg+=" $!"
tq=$(wait_qemus $tpid 2 || true)
(cd "$dir" && exec "$run2" --share "$dir" -- sh -c ": >'$dir/up'; exec sleep 1000") >/dev/null 2>"$dir/term.err" &
kpid=$!; bg+=" $kpid"
kq=$(wait_qemus $kpid 2 || true)
rc=0; wait $tpid || rc=$?
sleep 0.5
took=$(cat "$dir/tmo.took" 2>/dev/null || echo '?')
within() { awk -v t="$1" -v b="$2" 'BEGIN { exit !(t + 0 > 0 && t < b) }'; }
check "run2.sh --timeout 30: exits 124 (got $rc)" [ $rc = 124 ]
check "run2.sh --timeout 30: returns within 45 s (took $took s)" within "$took" 45
check "run2.sh --timeout: says 'command timed out after 30 s'" \
    grep -q 'command timed out after 30 s' "$dir/tmo.err"
# shellcheck disable=SC2086
check "run2.sh --timeout: both qemu (${tq:-none}) are gone" gone $tq

for _ in $(seq 1 600); do
    [ ! -f "$dir/up" ] && kill -0 $kpid 2>/dev/null || break
    sleep 0.2
done
kill -TERM $kpid 2>/dev/null
rc=0; wait $kpid || rc=$?
check "run2.sh SIGTERM while the command runs: exits 143 (got $rc)" [ $rc = 143 ]
[ $rc = 143 ] || grep -vE '^(zv-b: )?\[ *[0-9]+\.[0-9]+\]' "$dir/term.err" | tail -n 15
# shellcheck disable=SC2086
check "run2.sh SIGTERM: both qemu (${kq:-none}) are gone" gone $kq
echo "   (harness checks took $((SECONDS - t)) s)"

echo "== MPI across two VMs (one run2.sh boot)"
# zverbs as make install puts it, staged here; the guests copy it in.
if make -C "$b" install DESTDIR="$dir/stage" >"$dir/install.log" 2>&1; then
    ok "make install DESTDIR=... (staged for the VMs)"
else
    tail -n 20 "$dir/install.log"
    bad "make install DESTDIR=... (staged for the VMs)"
fi
tmo=${ZV_TWO_HOST_TIMEOUT:-$([ "$full" = 1 ] && echo 7200 || echo 1200)}
t=$SECONDS
"$run2" -v --timeout "$tmo" --share "$src" --share "$b" --share "$dir" \
    -e ZV_BUILDDIR="$b" -e ZV_SRCDIR="$src" -e ZV_TWO_HOST_FULL="$full" -e ZV_TWO_HOST_STAGED="$dir/stage" \
    ${ZV_TWO_HOST_TLS:+-e ZV_TWO_HOST_TLS="$ZV_TWO_HOST_TLS"} ${ZV_SOAK_SECONDS:+-e ZV_SOAK_SECONDS="$ZV_SOAK_SECONDS"} \
    ${ZV_BUSY_SECONDS:+-e ZV_BUSY_SECONDS="$ZV_BUSY_SECONDS"} ${ZV_BUSY_RUNS:+-e ZV_BUSY_RUNS="$ZV_BUSY_RUNS"} \
    ${ZV_TWO_HOST_PARTS:+-e ZV_TWO_HOST_PARTS="$ZV_TWO_HOST_PARTS"} -- "$here/two-host-tests.sh" --guest 'a b' "c'd" \
    >"$dir/guest.out" 2>"$dir/guest.err" &
gpid=$!; bg+=" $gpid"
gq=$(wait_qemus $gpid 2 || true)
rc=0; wait $gpid || rc=$?
cat "$dir/guest.out"
grep -E '^zverbs-vm2?: |^zv-b: zverbs-vm: ' "$dir/guest.err" | grep -vE 'init \[' | sed 's/^/   /'
[ $rc = 0 ] || grep -vE '^(zv-b: )?\[ *[0-9]+\.[0-9]+\]|init \[' "$dir/guest.err" | tail -n 15
gp=$(grep -c '^ok ' "$dir/guest.out"); gf=$(grep -c '^FAIL' "$dir/guest.out"); gs=$(grep -c '^skip' "$dir/guest.out")
pass=$((pass + gp)) fail=$((fail + gf)) skip=$((skip + gs))
check "the guest part ran to its end (run2.sh exit $rc, $((SECONDS - t)) s)" \
    grep -q '^guest: [0-9]* passed' "$dir/guest.out"
check "run2.sh exit status is the guest part's ($rc)" [ $rc = "$([ "$gf" = 0 ] && echo 0 || echo 1)" ]
check "run2.sh: arguments arrive verbatim" grep -qxF "arguments: [a b] [c'd]" "$dir/guest.out"
check "run2.sh: stderr stays on stderr" \
    sh -c "grep -qx 'a line on stderr' '$dir/guest.err' && ! grep -q 'a line on stderr' '$dir/guest.out'"
# shellcheck disable=SC2086
check "no qemu left after a run whose zv-b was killed (${gq:-none})" gone $gq

echo "two-host stage: $((SECONDS - start)) s"
echo "two-host: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
