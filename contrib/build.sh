#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up the machine (Debian packages, UCX sources) and build zverbs in
# ./build (inside the work tree, so the Soft-RoCE VM sees it read-write).
# usage: contrib/build.sh   (ZV_BUILDDIR overrides the build directory)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${ZV_BUILDDIR:-$repo/build}

"$repo/contrib/setup.sh"
cd "$repo"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    ./autogen.sh
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$repo/configure" -nt Makefile ]; then
    # The tiers install as root into the VM's (throw-away) system: UCX's and
    # Open MPI's own directories. ZV_CONFIGURE_FLAGS may override them.
    # shellcheck disable=SC2086  # flags are split on purpose
    "$repo/configure" --with-ucx-moduledir=system --with-ompi-componentdir=system \
        ${ZV_CONFIGURE_FLAGS:-}
fi
make -j2
make -j2 check TESTS= >/dev/null   # build the test programs too
echo "build: done in $build"
