#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Loading tests that need no RDMA device: the module registers its config
# with UCX (ucx_info -c/-f), a layout-skewed build refuses to register with
# one warning, and the Open MPI component brings the module into an MPI
# process without LD_PRELOAD.
set -u
b=${ZV_BUILDDIR:?}
mod=$b/.libs/libuct_zv.so.0
skew=$b/.libs/libuct_zvskew.so.0
pass=0; fail=0
check() { # name, then a command that must succeed
    local name=$1; shift
    if "$@"; then echo "PASS: $name"; pass=$((pass+1))
    else echo "FAIL: $name"; fail=$((fail+1)); fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

LD_PRELOAD=$mod ucx_info -c >"$tmp/c.out" 2>"$tmp/c.err"
check "ucx_info -c lists UCX_ZV_GID_INDEX" grep -q '^UCX_ZV_GID_INDEX=auto$' "$tmp/c.out"
check "ucx_info -c lists UCX_RC_ZV_RX_QUEUE_LEN" grep -q '^UCX_RC_ZV_RX_QUEUE_LEN=' "$tmp/c.out"
check "module load is silent" test ! -s "$tmp/c.err"
LD_PRELOAD=$mod ucx_info -f >"$tmp/f.out" 2>&1
check "ucx_info -f documents the zv md" grep -q 'Index of the port GID to use' "$tmp/f.out"
check "ucx_info -f documents rc_zv" grep -q 'shared receive' "$tmp/f.out"

# UCX logs to stdout: the warning is in the same stream as the config.
LD_PRELOAD=$skew ucx_info -c >"$tmp/s.out" 2>&1
check "skewed layout: constructor refuses to register" \
      bash -c "! grep -q 'UCX_RC_ZV_' '$tmp/s.out'"
check "skewed layout: exactly one warning naming the struct" \
      test "$(grep -c 'not registering the zv transports.*uct_base_iface_t' "$tmp/s.out")" = 1

if [ -x "$b/mpi-tests/zv_probe" ] && command -v mpirun >/dev/null; then
    # The component from the build tree, found through Open MPI's component
    # path; it loads the module from the build tree too. No LD_PRELOAD.
    cpath="$b/.libs:$(ompi_info --parsable --param mca base --level 9 2>/dev/null |
                      sed -n 's/^mca:mca:base:param:mca_base_component_path:value:"\(.*\)"$/\1/p')"
    export OMPI_MCA_mca_base_component_path=$cpath
    export OMPI_MCA_rcache_zverbs_module=$mod
    ompi_info >"$tmp/ompi.out" 2>&1
    check "ompi_info lists the zverbs component" grep -q 'MCA rcache: zverbs' "$tmp/ompi.out"
    mpirun --allow-run-as-root -np 1 "$b/mpi-tests/zv_probe" >"$tmp/p.out" 2>&1
    check "MPI process has zv without LD_PRELOAD" grep -q 'zv registered' "$tmp/p.out"
    OMPI_MCA_rcache_zverbs_enable=0 mpirun --allow-run-as-root -np 1 \
        "$b/mpi-tests/zv_probe" >"$tmp/p0.out" 2>&1
    check "rcache_zverbs_enable=0 leaves zv out" grep -q 'zv NOT registered' "$tmp/p0.out"
else
    echo "FAIL: Open MPI probe not built (mpi-tests/zv_probe) or mpirun missing"
    fail=$((fail+1))
fi

echo "module_load: $pass passed, $fail failed"
[ $fail = 0 ]
