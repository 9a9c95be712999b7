#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Device tier: run test/device/device-tests.sh in the Soft-RoCE VM (or
# directly on a host with an active RDMA port), then the two-rail stage
# (test/device/rails-tests.sh in a VM with two NICs) and the two-host stage
# (test/device/two-host-tests.sh: two VMs joined by a virtual wire), and,
# with ZV_DEB_DIR, the package stage (test/device/deb-suite.sh). Called
# by `make check-device`. Fails when any stage fails; the exit status is
# the first failed stage's.
#   ZV_RAILS_STAGE=auto|1|0     run the two-rail stage: auto (default) runs
#                               it unless this host has an active RDMA port
#   ZV_TWO_HOST_STAGE=auto|1|0  run the two-host stage: auto (default) runs
#                               it unless this host has an active RDMA port
#   ZV_DEVICE_STAGES="..."      which stages to consider (default "harness
#                               one-vm rails packages two-host"); contrib/
#                               test.sh runs the package stage apart, once
#                               the packages built beside the others are there
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/contrib/stages.sh"
stages=" ${ZV_DEVICE_STAGES:-harness one-vm rails packages two-host} "
want() { case $stages in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
build=${ZV_BUILDDIR:-$(pwd)}
build=$(cd "$build" && pwd)
# A guard against a hang, not a budget: the one-VM stage ran close to 30
# minutes in CI (2026-12), and load beside it stretches that.
timeout=${ZV_DEVICE_TIMEOUT:-2700}
echo "device tier: build $build, timeout ${timeout}s"
hca=0
if ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then hca=1; fi
# The UCX sources the build used: make (install) inside the VM must see the
# same headers its dependency files name, wherever they were unpacked.
ucx_src=$(sed -n 's/^UCX_SRC = //p' "$build/Makefile")
# A second build, configured as a user without root would configure it
# (--prefix in their home, every other directory by default), for the
# device tests' unprivileged install: in the VM, user zvuser runs its
# make install and an MPI job, with no root step (ZV_PREFIX_CHECK=0 skips).
prefix_build=
if [ "${ZV_PREFIX_CHECK:-1}" = 1 ] && want one-vm; then
    prefix_build=$build/prefix-user
    mkdir -p "$prefix_build"
    prefix_make() {
        { [ -f "$prefix_build/Makefile" ] ||
          (cd "$prefix_build" && "$src/configure" --prefix=/home/zvuser/zv \
               ${ucx_src:+--with-ucx-src="$ucx_src"} > configure.out 2>&1); } &&
        make -C "$prefix_build" -j2 > "$prefix_build/make.out" 2>&1
    }
    # (beside the harness, whose VMs mostly wait)
    stage_run "device: build for the unprivileged install (--prefix)" prefix_make &
    prefix_pid=$!
fi
# The harness itself first: exit statuses, timeouts, clean-up.
if [ $hca = 0 ] && want harness; then
    stage_run "device: the VM harness (contrib/vm/test-harness.sh)" "$src/contrib/vm/test-harness.sh" --timeout-test 30 ||
        { echo "device tier: the VM harness is broken"; exit 1; }
fi
if [ -n "$prefix_build" ] && ! wait $prefix_pid; then
    tail -n 20 "$prefix_build/configure.out" "$prefix_build/make.out" 2>/dev/null
    echo "device tier: the build for the unprivileged install (configure --prefix) failed"
    exit 1
fi
# Both installs staged here, as the two-host stage stages its own: make
# install under emulation spends half a minute in libtool's shell for the
# three libraries (the guest copies the staged tree in: a second or two).
# The user's install runs as nobody (no root step, nothing written outside
# its DESTDIR); the guest checks every file it staged is under the prefix.
stage_root= stage_user=
if want one-vm && [ $hca = 0 ]; then
    stage_root=$build/stage-one-vm
    rm -rf "$stage_root"
    make -C "$build" install DESTDIR="$stage_root" > "$build/stage-one-vm.log" 2>&1 ||
        { tail -n 20 "$build/stage-one-vm.log"; echo "device tier: make install DESTDIR=$stage_root failed"; exit 1; }
    if [ -n "$prefix_build" ]; then
        stage_user=$prefix_build/stage
        rm -rf "$stage_user"; mkdir -p "$stage_user"; chown nobody: "$stage_user"
        setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/nonexistent \
            make -C "$prefix_build" install DESTDIR="$stage_user" > "$prefix_build/stage.log" 2>&1 ||
            { tail -n 20 "$prefix_build/stage.log"; echo "device tier: make install DESTDIR=... as nobody failed"; exit 1; }
    fi
fi
status=0
if want one-vm; then
    stage_run "device: one VM (test/device/device-tests.sh)" \
    "$src/contrib/vm/run.sh" --timeout "$timeout" --cpus 2 --share "$src" --share "$build" \
        ${ucx_src:+--share "$ucx_src"} \
        -e ZV_BUILDDIR="$build" -e ZV_SRCDIR="$src" ${prefix_build:+-e ZV_PREFIX_BUILDDIR="$prefix_build"} \
        ${stage_root:+-e ZV_INSTALL_STAGED="$stage_root"} ${stage_user:+-e ZV_PREFIX_STAGED="$stage_user"} -- \
        "$src/test/device/device-tests.sh" || status=$?
fi

rails=${ZV_RAILS_STAGE:-auto}
if ! want rails; then
    :
elif [ "$rails" = 1 ] || { [ "$rails" = auto ] && [ $hca = 0 ]; }; then
    echo "device tier: two-rail stage (a VM with two NUMA nodes and a NIC on each)"
    rc=0
    stage_run "device: two rails (test/device/rails-tests.sh)" \
    "$src/contrib/vm/run.sh" --timeout 1200 --cpus 2 --numa 2 --nics 2 --share "$src" --share "$build" \
        ${ucx_src:+--share "$ucx_src"} \
        -e ZV_BUILDDIR="$build" -e ZV_SRCDIR="$src" -- \
        "$src/test/device/rails-tests.sh" || rc=$?
    [ $status != 0 ] || status=$rc
else
    echo "device tier: two-rail stage not run (ZV_RAILS_STAGE=$rails$([ $hca = 0 ] || echo ', active RDMA port here'))"
fi

# The Debian packages, in a VM of their own (its system has no make install
# in it): made by contrib/deb/build.sh, which contrib/test.sh runs first and
# names in ZV_DEB_DIR.
if ! want packages; then
    :
elif [ -n "${ZV_DEB_DIR:-}" ]; then
    echo "device tier: package stage (apt install, MPI job, apt purge; $ZV_DEB_DIR)"
    rc=0
    stage_run "device: the packages installed (test/device/deb-suite.sh)" \
    "$src/contrib/vm/run.sh" --timeout 900 --cpus 2 --share "$src" --share "$build" \
        --share "$ZV_DEB_DIR" -e ZV_BUILDDIR="$build" -e ZV_SRCDIR="$src" \
        -e ZV_DEB_DIR="$ZV_DEB_DIR" -- "$src/test/device/deb-suite.sh" || rc=$?
    [ $status != 0 ] || status=$rc
else
    echo "device tier: package stage not run (ZV_DEB_DIR unset: contrib/deb/build.sh makes the packages)"
fi

stage=${ZV_TWO_HOST_STAGE:-auto}
want two-host || exit $status
if [ "$stage" = 0 ] || { [ "$stage" = auto ] && [ $hca = 1 ]; }; then
    echo "device tier: two-host stage not run (ZV_TWO_HOST_STAGE=$stage$([ $hca = 0 ] || echo ', active RDMA port here'))"
    exit $status
fi
echo "device tier: two-host stage"
rc=0
ZV_BUILDDIR=$build ZV_SRCDIR=$src stage_run "device: two hosts (test/device/two-host-tests.sh)" \
    "$src/test/device/two-host-tests.sh" || rc=$?
[ $status != 0 ] || status=$rc
exit $status
