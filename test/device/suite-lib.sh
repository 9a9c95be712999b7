#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Shared by mpi-suite.sh and faults-suite.sh (sourced, never run). Sourced
# by device-tests.sh, they use its check(), $b, $s, $dev, $tmp and counts;
# run standalone on the device, this sets those up and installs the build
# (suite_standalone=1: the suite prints its own totals; ZV_SUITE_NO_INSTALL=1
# leaves the install to the caller). Either way it
# provides $ms_dir (work files), $ms_t (the mpi-tests programs),
# $ms_dir/tls (ucx_info -d with the module) and ms_run.
if ! declare -F check > /dev/null; then      # standalone
    set -u
    b=${ZV_BUILDDIR:?}; s=${ZV_SRCDIR:?}
    pass=0; fail=0
    check() { local name=$1; shift
        if "$@"; then echo "PASS: $name"; pass=$((pass+1)); else echo "FAIL: $name"; fail=$((fail+1)); fi; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
    # Open MPI 5's mpirun hands every rank PMIx's component directory as
    # mca_base_component_path: name Open MPI's own for every mpirun here, as
    # the README does (nothing under Open MPI 4.1, whose ranks search it).
    eval "$("$s/contrib/ompi-rank-path.sh" --env)"
    if [ -z "${ZV_SUITE_NO_INSTALL:-}" ]; then   # deb-suite.sh installs packages instead
        make -C "$b" install > "$tmp/install.log" 2>&1 || { tail "$tmp/install.log"; exit 1; }
        ldconfig
    fi
    suite_standalone=1
fi

ms_dir=$tmp/mpi-suite; mkdir -p "$ms_dir"
ms_t=$b/mpi-tests
[ -s "$ms_dir/tls" ] || LD_PRELOAD=$b/.libs/libuct_zv.so.0 ucx_info -d > "$ms_dir/tls" 2>&1

# mpirun over one zv transport; UCX_TLS without sm, so ranks on one host
# talk through the device.
ms_run() { # tl nranks mpirun-and-program-args...
    local tl=$1 np=$2; shift 2
    local over=()
    [ "$np" -le "$(nproc)" ] || over=(--oversubscribe)   # correctness only, never timed
    timeout "${ms_timeout:-600}" mpirun --allow-run-as-root -np "$np" "${over[@]}" --mca pml ucx \
        --mca pml_ucx_tls "$tl" --mca pml_ucx_devices "$dev" \
        -x UCX_TLS="$tl,self" -x UCX_NET_DEVICES="$dev:1" "$@"
}
