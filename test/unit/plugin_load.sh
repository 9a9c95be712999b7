#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own module loader (UCX 1.22+, UCX_PLUGIN_PATH), with the UCX zverbs
# was configured against: UCX finds the module with no LD_PRELOAD, zv is
# registered once however many copies of the module a process loads, and
# libucs_zv turns UCP's registration cache off by default. With an active
# RDMA port (the Soft-RoCE VM), ucx_info -d lists rc_zv, ud_zv and uc_zv,
# and a 2-rank MPI job (zv_osu, every byte checked) runs over each of them
# with nothing but UCX_PLUGIN_PATH, and over rc_zv with the Open MPI
# component loading a second copy of the module beside UCX's loader.
# Skipped, with the reason, where that UCX has no such loader (UCX 1.13 to
# 1.21: test/unit/module_load.sh covers the ways in there), and its device
# part is reported as skipped where no port is up: a skip is never a pass.
set -u
b=${ZV_BUILDDIR:?}
mk() { sed -n "s/^$1 = //p" "$b/Makefile"; }
ucx_info=$(mk UCX_INFO); ver=$(mk UCX_VERSION)
if [ "$(mk ZV_PLUGIN_LOADER)" != yes ]; then
    echo "SKIP: UCX $ver ($ucx_info) loads only the modules compiled into it (configure found no UCX_PLUGIN_PATH): no plugin loader to test"
    exit 77
fi
pass=0; fail=0; skip=0
check() { # name, then a command that must succeed
    local name=$1; shift
    if "$@"; then echo "PASS: $name"; pass=$((pass+1))
    else echo "FAIL: $name"; fail=$((fail+1)); fi
}
tmp=$(mktemp -d); trap '[ -n "${ZV_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
unset LD_PRELOAD UCX_PLUGIN_PATH UCX_RCACHE_ENABLE UCX_TLS UCX_MODULES
# What make install puts in the module directory, and nothing else of .libs.
mkdir "$tmp/plugins" "$tmp/copy"
for m in libuct_zv.so.0 libucs_zv.so.0; do
    ln -s "$b/.libs/$m" "$tmp/plugins/$m"
    cp -L "$b/.libs/$m" "$tmp/copy/$m"
done
info() { UCX_PLUGIN_PATH=$tmp/plugins "$ucx_info" "$@"; }
count() { grep -c "$1" "$2"; }

"$ucx_info" -c >"$tmp/none.out" 2>&1
moddir=$(sed -n 's/^UCX_MODULE_DIR=//p' "$tmp/none.out")
if [ -e "$moddir/libuct_zv.so.0" ]; then
    echo "(zv is installed in UCX's module directory $moddir: UCX finds it without UCX_PLUGIN_PATH)"
else
    check "without UCX_PLUGIN_PATH, UCX $ver has no zv" test "$(count '^UCX_ZV_GID_INDEX=' "$tmp/none.out")" = 0
fi
info -c >"$tmp/c.out" 2>"$tmp/c.err"
check "UCX_PLUGIN_PATH alone: ucx_info -c lists UCX_ZV_GID_INDEX once" \
      test "$(count '^UCX_ZV_GID_INDEX=' "$tmp/c.out")" = 1
check "UCX_PLUGIN_PATH alone: ucx_info -c lists UCX_RC_ZV_RX_QUEUE_LEN" grep -q '^UCX_RC_ZV_RX_QUEUE_LEN=' "$tmp/c.out"
check "UCX_PLUGIN_PATH alone: loading is silent" test ! -s "$tmp/c.err"
# Two files of the module in one process: the build tree's preloaded, a
# copy found by the loader. The first registers, the second stands aside.
LD_PRELOAD=$b/.libs/libuct_zv.so.0 UCX_PLUGIN_PATH=$tmp/copy "$ucx_info" -c >"$tmp/two.out" 2>&1
check "LD_PRELOAD and a copy on UCX_PLUGIN_PATH: zv registered once" \
      test "$(count '^UCX_ZV_GID_INDEX=' "$tmp/two.out")" = 1
check "UCP's registration cache is off by default under the loader" grep -q '^UCX_RCACHE_ENABLE=n$' "$tmp/c.out"
UCX_RCACHE_ENABLE=y info -c >"$tmp/y.out" 2>&1
check "the user's UCX_RCACHE_ENABLE=y wins" grep -q '^UCX_RCACHE_ENABLE=y$' "$tmp/y.out"
UCX_TLS=rc_verbs,self info -c >"$tmp/v.out" 2>&1
check "UCX_TLS without a zv transport keeps UCP's default (try)" grep -q '^UCX_RCACHE_ENABLE=try$' "$tmp/v.out"
UCX_MODULES=^zv info -c >"$tmp/m.out" 2>&1
check "UCX_MODULES=^zv leaves zv and its defaults out" \
      bash -c "! grep -q '^UCX_ZV_GID_INDEX=' '$tmp/m.out' && grep -q '^UCX_RCACHE_ENABLE=try$' '$tmp/m.out'"

# The transports need a device: in the Soft-RoCE VM, or on a host with an
# active RDMA port.
if ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
    info -d >"$tmp/d.out" 2>&1
    for tl in rc_zv ud_zv uc_zv; do
        check "UCX_PLUGIN_PATH alone: ucx_info -d lists $tl" grep -q "Transport: $tl\$" "$tmp/d.out"
    done
    check "ucx_info -d lists the zv memory domain once per device" \
          test "$(count 'Component: zv$' "$tmp/d.out")" = "$(ibv_devinfo -l 2>/dev/null | awk 'NR>1 && NF' | wc -l)"
    # An MPI job with nothing but UCX_PLUGIN_PATH: no LD_PRELOAD, no rcache
    # component (--mca rcache ^zverbs); LD_LIBRARY_PATH makes pml ucx open
    # this UCX (Open MPI's was built against another, same soname).
    dev=$(ibv_devinfo -l 2>/dev/null | awk 'NR==2 {print $1}')
    if [ "$(mk ZV_OMPI_COMPONENT)" = yes ] && [ -x "$b/mpi-tests/zv_osu" ] && command -v mpirun >/dev/null; then
        over=(); [ "$(nproc)" -ge 2 ] || over=(--oversubscribe)   # correctness only
        for tl in rc_zv ud_zv uc_zv; do
            timeout 600 mpirun --allow-run-as-root -np 2 "${over[@]}" --mca pml ucx \
                --mca pml_ucx_tls $tl --mca pml_ucx_devices "$dev" --mca rcache ^zverbs \
                -x LD_LIBRARY_PATH="$(mk UCX_LIBDIR)" -x UCX_PLUGIN_PATH="$tmp/plugins" \
                -x UCX_TLS=$tl,self -x UCX_NET_DEVICES="$dev:1" -x LD_DEBUG=files \
                "$b/mpi-tests/zv_osu" -t lat -t bw -S 262144 -i 4 >"$tmp/mpi-$tl.out" 2>&1
            rc=$?
            check "MPI over $tl with UCX_PLUGIN_PATH alone: zv_osu 1 B..256 KiB validated (exit $rc)" \
                  test $rc = 0
            check "MPI over $tl: both ranks opened this UCX's libucp and the module from UCX_PLUGIN_PATH, not the component" \
                  bash -c "test \$(grep -c 'calling init: $(mk UCX_LIBDIR)/libucp.so.0\$' '$tmp/mpi-$tl.out') = 2 &&
                           test \$(grep -c 'calling init: $tmp/plugins/libuct_zv.so.0\$' '$tmp/mpi-$tl.out') = 2 &&
                           ! grep -q 'calling init: .*mca_rcache_zverbs' '$tmp/mpi-$tl.out'"
        done
        # Both ways in at once: the Open MPI component loads one copy of the
        # module (rcache_zverbs_module), UCX's loader another from
        # UCX_PLUGIN_PATH; zv is registered once in each rank, and MPI runs.
        eval "$("$(dirname "$0")/../../contrib/ompi-rank-path.sh" --env "$b/.libs")"
        for prog in zv_probe zv_osu; do
            args=(); [ $prog = zv_probe ] || args=(-t lat -t bw -S 262144 -i 4)
            timeout 600 mpirun --allow-run-as-root -np 2 "${over[@]}" --mca pml ucx \
                --mca pml_ucx_tls rc_zv --mca pml_ucx_devices "$dev" \
                --mca rcache_zverbs_module "$tmp/copy/libuct_zv.so.0" \
                -x LD_LIBRARY_PATH="$(mk UCX_LIBDIR)" -x UCX_PLUGIN_PATH="$tmp/plugins" \
                -x UCX_TLS=rc_zv,self -x UCX_NET_DEVICES="$dev:1" -x LD_DEBUG=files \
                "$b/mpi-tests/$prog" "${args[@]}" >"$tmp/both-$prog.out" 2>&1
            rc=$?
            check "MPI with the component and UCX_PLUGIN_PATH both loading zv: $prog exits 0 (exit $rc)" test $rc = 0
        done
        check "both ranks loaded both copies (the component's and the loader's)" \
              bash -c "test \$(grep -c 'calling init: $tmp/copy/libuct_zv.so.0\$' '$tmp/both-zv_probe.out') = 2 &&
                       test \$(grep -c 'calling init: $tmp/plugins/libuct_zv.so.0\$' '$tmp/both-zv_probe.out') = 2"
        check "zv is registered once in each rank (zv_probe: one zv component per rank)" \
              test "$(count 'UCT component zv registered' "$tmp/both-zv_probe.out")" = 2
    else
        echo "SKIP: MPI over zv with UCX_PLUGIN_PATH alone: no Open MPI, mpirun or mpi-tests/zv_osu (make check builds it)"
        skip=1
    fi
else
    echo "SKIP: ucx_info -d lists rc_zv, ud_zv, uc_zv, and MPI over them: no active RDMA port here (run in the Soft-RoCE VM)"
    skip=1
fi
echo "plugin_load: $pass passed, $fail failed, $skip part skipped"
[ $fail = 0 ] || exit 1
# A part skipped is not a pass.
[ $skip = 0 ] || exit 77
exit 0
