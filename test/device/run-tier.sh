#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Device tier: run test/device/device-tests.sh in the Soft-RoCE VM (or
# directly on a host with an active RDMA port). Called by `make check-device`.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZV_BUILDDIR:-$(pwd)}
build=$(cd "$build" && pwd)
timeout=${ZV_DEVICE_TIMEOUT:-2700}   # the MPI suite and applications (mpi-suite.sh) take ~15 min
echo "device tier: build $build, timeout ${timeout}s"
# The harness itself first: exit statuses, timeouts, clean-up.
if ! ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
    "$src/contrib/vm/test-harness.sh" || { echo "device tier: the VM harness is broken"; exit 1; }
fi
# The UCX sources the build used: make (install) inside the VM must see the
# same headers its dependency files name, wherever they were unpacked.
ucx_src=$(sed -n 's/^UCX_SRC = //p' "$build/Makefile")
exec "$src/contrib/vm/run.sh" --timeout "$timeout" --cpus 2 --share "$src" --share "$build" \
    ${ucx_src:+--share "$ucx_src"} \
    -e ZV_BUILDDIR="$build" -e ZV_SRCDIR="$src" -- \
    "$src/test/device/device-tests.sh"
