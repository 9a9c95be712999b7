#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Loading tests that need no RDMA device: the module registers its config
# with UCX (ucx_info -c/-f), a layout-skewed build refuses to register with
# one warning, and the Open MPI component brings the module into an MPI
# process without LD_PRELOAD.
set -u
b=${ZV_BUILDDIR:?}
mod=$b/.libs/libuct_zv.so.0
skew=$b/.libs/libuct_zv_skew.so.0
pass=0; fail=0
check() { # name, then a command that must succeed
    local name=$1; shift
    if "$@"; then echo "PASS: $name"; pass=$((pass+1))
    else echo "FAIL: $name"; fail=$((fail+1)); fi
}
tmp=$(mktemp -d); trap '[ -n "${ZV_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
# The ucx_info of the UCX configure found (configure --with-ucx=DIR: that
# prefix's; a module built against one UCX is refused by another's).
ucx_info=$(sed -n 's/^UCX_INFO = //p' "$b/Makefile"); ucx_info=${ucx_info:-ucx_info}

LD_PRELOAD=$mod "$ucx_info" -c >"$tmp/c.out" 2>"$tmp/c.err"
check "ucx_info -c lists UCX_ZV_GID_INDEX" grep -q '^UCX_ZV_GID_INDEX=auto$' "$tmp/c.out"
check "ucx_info -c lists UCX_RC_ZV_RX_QUEUE_LEN" grep -q '^UCX_RC_ZV_RX_QUEUE_LEN=' "$tmp/c.out"
check "module load is silent" test ! -s "$tmp/c.err"
LD_PRELOAD=$mod "$ucx_info" -f >"$tmp/f.out" 2>&1
check "ucx_info -f documents the zv md" grep -q 'Index of the port GID to use' "$tmp/f.out"
check "ucx_info -f documents rc_zv" grep -q 'Transport retry timeout of the RC queue pairs' "$tmp/f.out"

# UCX logs to stdout: the warning is in the same stream as the config.
LD_PRELOAD=$skew "$ucx_info" -c >"$tmp/s.out" 2>&1
check "skewed layout: constructor refuses to register" \
      bash -c "! grep -q 'UCX_RC_ZV_' '$tmp/s.out'"
check "skewed layout: exactly one warning naming the struct" \
      test "$(grep -c 'not registering the zv transports.*uct_base_iface_t' "$tmp/s.out")" = 1

if [ "$(sed -n 's/^ZV_OMPI_COMPONENT = //p' "$b/Makefile")" = no ]; then
    # configured --without-ompi, or no Open MPI development files: there is
    # nothing to load.
    echo "SKIP: the Open MPI component: configure did not build it"
elif [ -x "$b/mpi-tests/zv_probe" ] && command -v mpirun >/dev/null; then
    # The component from the build tree, found through Open MPI's component
    # path (in mpirun's environment: Open MPI 5's mpirun would otherwise
    # give the ranks PMIx's directory alone); it loads the module from the
    # build tree too. No LD_PRELOAD.
    cpath=$("${ZV_SRCDIR:?}/contrib/ompi-rank-path.sh" "$b/.libs")
    export OMPI_MCA_mca_base_component_path=$cpath
    export OMPI_MCA_rcache_zverbs_module=$mod
    ompi_info >"$tmp/ompi.out" 2>&1
    check "ompi_info lists the zverbs component" grep -q 'MCA rcache: zverbs' "$tmp/ompi.out"
    mpirun --allow-run-as-root -np 1 "$b/mpi-tests/zv_probe" >"$tmp/p.out" 2>&1
    check "MPI process has zv without LD_PRELOAD" grep -q 'zv registered' "$tmp/p.out"
    OMPI_MCA_rcache_zverbs_enable=0 mpirun --allow-run-as-root -np 1 \
        "$b/mpi-tests/zv_probe" >"$tmp/p0.out" 2>&1
    check "rcache_zverbs_enable=0 leaves zv out" grep -q 'zv NOT registered' "$tmp/p0.out"

    # MCA parameters for the registration cache, mapped onto UCX_ZV_*.
    ompi_info --param rcache zverbs --level 9 >"$tmp/par.out" 2>&1
    for p in monitor:UCX_ZV_RCACHE_MONITOR max_size:UCX_ZV_RCACHE_MAX_SIZE \
             max_regions:UCX_ZV_RCACHE_MAX_REGIONS; do
        check "ompi_info documents rcache_zverbs_${p%%:*} as ${p#*:}" \
              grep -A1 -q "parameter \"rcache_zverbs_${p%%:*}\"" "$tmp/par.out"
        check "rcache_zverbs_${p%%:*}'s documentation names ${p#*:}" \
              grep -q "Exported as ${p#*:}" "$tmp/par.out"
    done
    ompi_info --parsable --param rcache zverbs --level 9 2>/dev/null |
        sed -n 's/^mca:rcache:zverbs:param:rcache_zverbs_monitor:help:.*Syntax: one of: \([a-z, ]*\)\..*/\1/p' |
        tr -d ' ' | tr ',' '\n' | sort >"$tmp/mca-monitors"
    LD_PRELOAD=$mod "$ucx_info" -f 2>/dev/null |
        sed -n '/^UCX_ZV_RCACHE_MONITOR=/q; s/^# syntax: *\[\(.*\)\]$/\1/p' | tail -n1 |
        tr '|' '\n' | sort >"$tmp/ucx-monitors"
    check "rcache_zverbs_monitor offers UCX_ZV_RCACHE_MONITOR's values ($(tr '\n' ' ' <"$tmp/ucx-monitors"))" \
          bash -c "test -s '$tmp/ucx-monitors' && cmp -s '$tmp/mca-monitors' '$tmp/ucx-monitors'"
    probe() { # out-file, then mpirun arguments before the program
        local out=$1; shift
        mpirun --allow-run-as-root -np 1 "$@" "$b/mpi-tests/zv_probe" >"$out" 2>&1
    }
    probe "$tmp/m0.out"
    check "no parameter: the module's defaults" \
          grep -q 'UCX_ZV_RCACHE_MONITOR=auto$' "$tmp/m0.out"
    probe "$tmp/m1.out" --mca rcache_zverbs_monitor ucm --mca rcache_zverbs_max_size 1g \
          --mca rcache_zverbs_max_regions 100
    check "--mca rcache_zverbs_monitor ucm reaches the md's configuration" \
          grep -q 'UCX_ZV_RCACHE_MONITOR=ucm$' "$tmp/m1.out"
    check "--mca rcache_zverbs_max_size 1g reaches it" \
          grep -qi 'UCX_ZV_RCACHE_MAX_SIZE=1G$' "$tmp/m1.out"
    check "--mca rcache_zverbs_max_regions 100 reaches it" \
          grep -q 'UCX_ZV_RCACHE_MAX_REGIONS=100$' "$tmp/m1.out"
    OMPI_MCA_rcache_zverbs_monitor=none probe "$tmp/m2.out"
    check "OMPI_MCA_rcache_zverbs_monitor=none reaches it" \
          grep -q 'UCX_ZV_RCACHE_MONITOR=none$' "$tmp/m2.out"
    probe "$tmp/m3.out" -x UCX_ZV_RCACHE_MONITOR=none --mca rcache_zverbs_monitor ucm
    check "UCX_ZV_RCACHE_MONITOR wins over the MCA parameter" \
          grep -q 'UCX_ZV_RCACHE_MONITOR=none$' "$tmp/m3.out"
    check "the conflict is reported once" \
          test "$(grep -c 'UCX_ZV_RCACHE_MONITOR=none in the environment wins over rcache_zverbs_monitor=ucm' "$tmp/m3.out")" = 1
    probe "$tmp/m4.out" -x UCX_ZV_RCACHE_MONITOR=ucm --mca rcache_zverbs_monitor ucm
    check "no report when both say the same" \
          bash -c "grep -q 'UCX_ZV_RCACHE_MONITOR=ucm$' '$tmp/m4.out' && ! grep -q 'wins over' '$tmp/m4.out'"
    probe "$tmp/m5.out" --mca rcache_zverbs_max_size 12q
    check "a malformed rcache_zverbs_max_size is reported and the job runs with the default" \
          bash -c "grep -q 'rcache_zverbs_max_size=12q is not a valid value' '$tmp/m5.out' &&
                   grep -q 'UCX_ZV_RCACHE_MAX_SIZE=auto$' '$tmp/m5.out'"
    probe "$tmp/m6.out" --mca rcache_zverbs_monitor bogus
    check "an unknown rcache_zverbs_monitor is reported and the job runs with the default" \
          bash -c "grep -q 'rcache_zverbs_monitor=bogus is not a valid value (expected one of: none, uffd, ucm, auto)' '$tmp/m6.out' &&
                   grep -q 'UCX_ZV_RCACHE_MONITOR=auto$' '$tmp/m6.out'"
else
    echo "FAIL: Open MPI probe not built (mpi-tests/zv_probe) or mpirun missing"
    fail=$((fail+1))
fi

echo "module_load: $pass passed, $fail failed"
[ $fail = 0 ]
