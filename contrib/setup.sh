#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install every Debian package zverbs needs to build, test and run its
# Soft-RoCE VM. Idempotent: does nothing (no apt call) when all is present.
# usage: contrib/setup.sh [--print]   (--print lists the packages and exits)
set -eu

packages=(
    # build
    build-essential autoconf automake libtool pkg-config dpkg-dev
    libucx-dev ucx-utils libibverbs-dev librdmacm-dev libhwloc-dev
    libopenmpi-dev openmpi-bin openmpi-common
    # the Debian packages (contrib/deb/build.sh)
    debhelper lintian fakeroot
    # tests and tools
    libgtest-dev googletest valgrind rdma-core ibverbs-providers ibverbs-utils
    perftest
    # fuzzing (libFuzzer) and sanitizer builds: test/fuzz/run.sh, test/unit/{asan,tsan}.sh
    clang libclang-rt-dev
    # the Soft-RoCE VM (Debian's kernel is fetched by contrib/vm/fetch-kernel.sh)
    qemu-system-x86 busybox-static kmod cpio zstd xz-utils iproute2
    # two VMs (contrib/vm/run2.sh): sshd in the guests for mpirun's launcher
    openssh-server openssh-client
    # unmodified MPI applications (test/device/mpi-suite.sh) and the
    # benchmark driver's plots (contrib/bench/mpi-bench.sh)
    hpcc lammps netpipe-openmpi gnuplot-nox
)

if [ "${1:-}" = --print ]; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} = 0 ]; then
    echo "setup: all ${#packages[@]} packages present"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
