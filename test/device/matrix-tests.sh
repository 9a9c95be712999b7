#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The version matrix's device tier (contrib/matrix.sh), in the Soft-RoCE VM
# as root: for each NAME:ROOT:BUILD, chroot into ROOT (its /proc, /sys and
# /dev, /dev/infiniband with it, bind-mounted from the guest; the work tree
# and /run/zv at their own paths; all in a mount namespace of its own) and
# there, against the root's UCX and Open MPI: with ZV_MATRIX_PACKAGES=1 the
# Debian packages in BUILD/deb (test/device/deb-suite.sh: install, MPI
# jobs, purge); where UCX loads modules itself, test/unit/plugin_load.sh;
# then install what matrix.sh staged in BUILD/matrix-stage,
# the module's transports in ucx_info (and, where UCX loads modules itself,
# found there with no LD_PRELOAD, an MPI job without the component), the
# UCT device tests
# ($ZV_MATRIX_GTEST_FILTER), a validated 2-rank MPI job over rc_zv, ud_zv
# and uc_zv, and UCP's protocol for a 1 MiB tag message over rc_zv beside
# rc_verbs (UCX_PROTO_INFO). Each root's counts and seconds go to
# BUILD/matrix-device.result ("pass fail seconds skipped"), its gtest log to
# BUILD/matrix-zv_device.log. Then the benchmarks named in $ZV_MATRIX_BENCH
# ("rndv rel": contrib/bench/NAME-bench.sh BUILD, in the same chroot, with
# the ZV_BENCH_* and UCX_* variables of the caller), each one's output in BUILD/matrix-bench-NAME.log
# and its exit status and seconds in BUILD/matrix-bench-NAME.result.
#
# usage: matrix-tests.sh NAME:ROOT:BUILD...
#        matrix-tests.sh --inside NAME BUILD   (in the root; by the above)
set -u
s=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${1:-}" != --inside ]; then
    status=0
    export ZV_SRC=$s ZV_MATRIX_GTEST_FILTER=${ZV_MATRIX_GTEST_FILTER:?} ZV_MATRIX_BENCH=${ZV_MATRIX_BENCH-} \
           ZV_MATRIX_PACKAGES=${ZV_MATRIX_PACKAGES-}
    for spec in "$@"; do
        name=${spec%%:*} rest=${spec#*:}; r=${rest%%:*} b=${rest#*:}
        echo "==== $name: chroot $r"
        export -p | grep -E '^declare -x (ZV_BENCH|UCX)_' > "$b/matrix-bench.env"   # for the benchmarks
        unshare --mount --propagation private bash -c '
            set -e; r=$1; shift
            mount -t proc proc "$r/proc"
            mount --rbind /sys "$r/sys"
            mount --rbind /dev "$r/dev"
            for d in "$ZV_SRC" /run/zv; do
                [ -d "$d" ] || continue
                mkdir -p "$r$d"; mount --bind "$d" "$r$d"
            done
            mount -t tmpfs -o mode=1777 tmp "$r/tmp"
            exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
                PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
                ZV_MATRIX_GTEST_FILTER="$ZV_MATRIX_GTEST_FILTER" ZV_MATRIX_BENCH="$ZV_MATRIX_BENCH" \
                ZV_MATRIX_PACKAGES="$ZV_MATRIX_PACKAGES" "$@"' \
            matrix "$r" "$s/test/device/matrix-tests.sh" --inside "$name" "$b" || status=1
        for x in $ZV_MATRIX_BENCH; do
            [ -f "$b/matrix-bench-$x.result" ] || status=1
        done
    done
    exit $status
fi

# ---- inside the root
name=$2 b=$3
pass=0; fail=0; skip=0
skipped() { echo "SKIP: $name: $* [${SECONDS}s]"; skip=$((skip+1)); }
check() { local what=$1; shift
    if "$@"; then echo "PASS: $name: $what [${SECONDS}s]"; pass=$((pass+1))
    else echo "FAIL: $name: $what [${SECONDS}s]"; fail=$((fail+1)); fi; }
tmp=$(mktemp -d)
finish() { echo "$pass $fail $SECONDS $skip" > "$b/matrix-device.result"
           echo "==== $name: $pass passed, $fail failed, $skip skipped"; rm -rf "$tmp"; }
trap finish EXIT

echo "$name: $(. /etc/os-release && echo "$PRETTY_NAME"); $(ucx_info -v | sed -n 's/^# *\(Library version\)/\1/p' | head -n1); $(ompi_info --version | head -n1)"
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
check "a verbs device in the root ($dev, /dev/infiniband bound)" test -n "$dev" -a -e /dev/infiniband/uverbs0
# The Debian packages (matrix.sh --packages) first, while nothing of
# zverbs is installed: deb-suite.sh installs, uses and purges them.
if [ -n "${ZV_MATRIX_PACKAGES-}" ]; then
    ZV_BUILDDIR=$b ZV_SRCDIR=$s ZV_DEB_DIR=$b/deb "$s/test/device/deb-suite.sh" > "$tmp/deb" 2>&1
    rc=$?
    sed 's/^/  deb| /' "$tmp/deb"
    check "the Debian packages installed, used and purged: deb-suite.sh, $(grep '^package:' "$tmp/deb" || echo 'no summary')" \
        test $rc = 0
fi
# Where this UCX loads modules itself (UCX 1.22 and later): the loader's
# checks (test/unit/plugin_load.sh, its device part too), while nothing of
# zverbs is installed; after the install below, UCX finds the module in
# its own module directory.
loader=$(sed -n 's/^ZV_PLUGIN_LOADER = //p' "$b/Makefile")
if [ "$loader" = yes ]; then
    ZV_BUILDDIR=$b "$s/test/unit/plugin_load.sh" > "$tmp/plugin" 2>&1
    rc=$?
    sed 's/^/  plugin| /' "$tmp/plugin"
    check "UCX's module loader: plugin_load.sh, $(grep '^plugin_load:' "$tmp/plugin" || echo 'no summary')" \
        test $rc = 0
fi
check "the staged install copied in" cp -a "$b/matrix-stage/." /
ldconfig
ompi_info > "$tmp/ompi" 2>&1
check "ompi_info lists MCA rcache: zverbs" grep -q 'MCA rcache: zverbs' "$tmp/ompi"
LD_PRELOAD=$b/.libs/libuct_zv.so.0 ucx_info -d > "$tmp/d" 2>&1
for tl in rc_zv ud_zv uc_zv; do
    check "ucx_info -d lists $tl on $dev:1" \
        bash -c "awk '/Transport: $tl\$/ {f=1} f && /Device: $dev:1/ {ok=1} END {exit !ok}' '$tmp/d'"
done
check "ucx_info -d: no UCX errors or warnings" bash -c "! grep -qE 'UCX +(ERROR|WARN)' '$tmp/d'"
if [ "$loader" = yes ]; then
    # Installed, nothing else: no LD_PRELOAD, no UCX_PLUGIN_PATH, and an MPI
    # job without the Open MPI component.
    env -u LD_PRELOAD -u UCX_PLUGIN_PATH ucx_info -d > "$tmp/d0" 2>&1
    for tl in rc_zv ud_zv uc_zv; do
        check "installed in UCX's module directory, no LD_PRELOAD: ucx_info -d lists $tl on $dev:1" \
            bash -c "awk '/Transport: $tl\$/ {f=1} f && /Device: $dev:1/ {ok=1} END {exit !ok}' '$tmp/d0'"
    done
    t0=$SECONDS
    timeout 300 mpirun --allow-run-as-root -np 2 --mca rcache ^zverbs --mca pml ucx --mca pml_ucx_tls rc_zv \
        --mca pml_ucx_devices "$dev" -x UCX_TLS=rc_zv,self -x UCX_NET_DEVICES="$dev:1" \
        "$b/mpi-tests/zv_osu" -t lat -t bw -S 1048576 -i 5 > "$tmp/osu0" 2>&1
    rc=$?
    sed -n '$p' "$tmp/osu0"; [ $rc = 0 ] || tail -n 15 "$tmp/osu0"
    check "MPI over rc_zv found by UCX's loader alone (no component, no LD_PRELOAD): lat and bw 1 B..1 MiB validated, $((SECONDS - t0)) s" \
        test $rc = 0
fi

# The UCT device tests (uct-tests.sh adds the spoofing test's address).
t0=$SECONDS
ZV_BUILDDIR=$b "$s/test/device/uct-tests.sh" "$b/matrix-zv_device.log" \
    --gtest_filter="$ZV_MATRIX_GTEST_FILTER"
rc=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$b/matrix-zv_device.log"
grep -E '^\[  FAILED  \] ' "$b/matrix-zv_device.log" | sort -u | head -n 20
check "UCT device tests ($ZV_MATRIX_GTEST_FILTER), $((SECONDS - t0)) s" test $rc = 0
check "UCT device tests: none skipped" bash -c "! grep -q '^\[  SKIPPED \]' '$b/matrix-zv_device.log'"

# Open MPI 5's mpirun hands the ranks PMIx's component path: name Open
# MPI's own directory, as the README does.
eval "$("$s/contrib/ompi-rank-path.sh" --env)"
echo "mca_base_component_path: ${OMPI_MCA_mca_base_component_path:-(Open MPI searches its own)}; PMIx's: ${PMIX_MCA_mca_base_component_path:-unset}"
timeout 300 mpirun --allow-run-as-root -np 2 "$b/mpi-tests/zv_probe" > "$tmp/probe" 2>&1
cat "$tmp/probe"
check "both ranks load zv through the component (no LD_PRELOAD)" \
    test "$(grep -c 'zv registered, 1 memory domain' "$tmp/probe")" = 2
check "no PMIx warnings about the component path (PMIX_MCA_mca_base_component_path=${PMIX_MCA_mca_base_component_path:-unset})" \
    bash -c "! grep -q 'bad prefix' '$tmp/probe'"
# Latency too: its blocking sends take UCP's rendezvous through the
# datatype iterator, which asserts on an md that UCP may not cache (UCX
# 1.18 as Debian 13 builds it aborted there over rc_zv; bw did not).
for tl in rc_zv ud_zv uc_zv; do
  for t in bw lat; do
    t0=$SECONDS
    timeout 300 mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_tls $tl \
        --mca pml_ucx_devices "$dev" -x UCX_TLS=$tl,self -x UCX_NET_DEVICES="$dev:1" \
        "$b/mpi-tests/zv_osu" -t $t -S 1048576 -i 5 > "$tmp/osu" 2>&1
    rc=$?
    sed -n '1p;$p' "$tmp/osu"
    [ $rc = 0 ] || tail -n 15 "$tmp/osu"
    check "MPI $t 1 B..1 MiB validated, 2 ranks, UCX_TLS=$tl,self, $((SECONDS - t0)) s" test $rc = 0
  done
done

# UCP's protocol selection (protocols v2, UCX 1.15 and later): for a 1 MiB
# tag message, each of UCP's tables (one per kind of send) names the same
# protocols over rc_zv as over UCX's own rc_verbs (the thresholds differ
# with the transports' limits; the self transport's tables are left out):
# with UCX's defaults (between two processes of one host UCP sends 1 MiB
# by eager fragments there) and with a 64 KiB rendezvous threshold, where
# the zero-copy rendezvous comes in.
# A table's title is "| context cfg#N | operation |" on one line (UCX 1.18)
# or on two (UCX 1.23, with a "| Range | Description | Config |" row).
proto_table() { # FILE: "operation: protocol, ..." per UCX_PROTO_INFO table
    sed 's/^\[[^]]*\] \[[^]]*\] *//' "$1" | awk -F'|' '
        function trim(x) { gsub(/^ +| +$/, "", x); return x }
        function flush() { if (op != "" && cur != "" && !(op in p)) p[op] = cur; cur = "" }
        function title(ctx, o) { flush(); op = (ctx ~ / self cfg#/) ? "" : trim(o) }
        !/^\|/ { next }
        NF == 4 { title($2, $3); next }
        NF == 3 && $2 ~ /cfg#/ { ctx = $2; next }
        NF == 3 && ctx != "" { title(ctx, $2); ctx = ""; next }
        NF == 5 && op != "" && trim($2) != "Range" {
            pr = trim($3); sub(/^\(\?\) /, "", pr); cur = cur (cur == "" ? "" : ", ") pr }
        END { flush(); for (o in p) print o ": " p[o] }' | sort
}
if ! grep -q 'Transport: rc_verbs$' "$tmp/d"; then
    # (Debian unstable's libucx0 1.23.0~rc1-1 ships no libuct_ib.)
    skipped "UCP's protocols over rc_zv beside rc_verbs: this UCX has no rc_verbs (ucx_info -d lists none)"
elif ucx_info -c 2>/dev/null | grep -q '^UCX_PROTO_INFO='; then
    mod=$b/.libs/libuct_zv.so.0
    . "$s/contrib/bench/bench-lib.sh"
    for thresh in auto 65536; do
        for tl in rc_zv rc_verbs; do
            tls=$tl,self; [ $tl = rc_zv ] || tls=rc_verbs,ud_verbs,self
            UCX_PROTO_INFO=y UCX_RNDV_THRESH=$thresh UCX_TLS=$tls UCX_NET_DEVICES=$dev:1 \
                UCX_WARN_UNUSED_ENV_VARS=n UCX_UD_VERBS_ETH_DGID_CHECK=n \
                pt_pair "$tmp/proto.$tl" -t tag_bw -s 1048576 -n 20
            proto_table "$tmp/proto.$tl" > "$tmp/table.$tl"
            echo "UCP's protocols over $tl (UCX_PROTO_INFO, UCX_RNDV_THRESH=$thresh, tag_bw 1 MiB):"
            sed 's/^/  /' "$tmp/table.$tl"
        done
        check "UCX_RNDV_THRESH=$thresh: UCP selects the same protocols over rc_zv as over rc_verbs ($(wc -l < "$tmp/table.rc_zv") kinds of tag send)" \
            bash -c "test -s '$tmp/table.rc_zv' && cmp -s '$tmp/table.rc_zv' '$tmp/table.rc_verbs'"
    done
fi
trap - EXIT
finish
for x in ${ZV_MATRIX_BENCH-}; do
    [ -f "$b/matrix-bench.env" ] && . "$b/matrix-bench.env"
    echo "==== $name: contrib/bench/$x-bench.sh $b"
    t0=$SECONDS
    "$s/contrib/bench/$x-bench.sh" "$b" > "$b/matrix-bench-$x.log"
    rc=$?
    cat "$b/matrix-bench-$x.log"
    echo "$rc $((SECONDS - t0))" > "$b/matrix-bench-$x.result"
    echo "==== $name: $x-bench.sh exit $rc, $((SECONDS - t0)) s"
done
[ $fail = 0 ]
