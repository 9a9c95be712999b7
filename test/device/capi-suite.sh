#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libzverbs suite of the device tier: contrib/examples/rc_pingpong built
# against the installed zverbs.pc (pkg-config --cflags --libs zverbs), then a
# server and a client on the device for each monitor; every message comes
# from fresh malloc() memory or from a buffer whose pages were replaced
# between messages, and the receiver checks every byte (exit 1 on stale data):
#  - uffd and none with direct system calls (syscall(2)): the kernel notifier
#    sees them, so nothing may be stale;
#  - ucm through libc (-l): UCM's hooks work in any program that links
#    libucm (libzverbs does), but they cannot see a raw system call, which is
#    why uffd is the default; the example's direct-syscall mode is not run
#    under ucm;
#  - auto: must resolve to uffd here;
#  - the negative control: ucm with direct system calls, which it cannot
#    see, must make the receivers report stale data and exit 1 (the check
#    can fail).
# After the user prefix install of device-tests.sh (as_user and
# /home/zvuser/zv), the user builds the example against its own
# /home/zvuser/zv/lib/pkgconfig and runs it, unprivileged, under uffd.
#
# usage: sourced by device-tests.sh after make install (uses its check(), $b,
#        $s, $dev, $tmp), or standalone on the device (installs the build):
#        ZV_BUILDDIR=B ZV_SRCDIR=S test/device/capi-suite.sh
. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"

cs_dir=$tmp/capi-suite; mkdir -p "$cs_dir"
cs_port=18600

# cs_pingpong LABEL EXPECT_MONITOR RUNNER... -- BINARY ARGS...: server and
# client of BINARY (one TCP port of their own) on $dev, both must pass.
cs_pingpong() {
    local label=$1 want=$2; shift 2
    local runner=()
    while [ "$1" != -- ]; do runner+=("$1"); shift; done
    shift
    cs_port=$((cs_port + 1))
    timeout 180 "${runner[@]}" "$@" -d "$dev" -p $cs_port > "$cs_dir/server" 2>&1 &
    local spid=$!
    timeout 180 "${runner[@]}" "$@" -d "$dev" -p $cs_port 127.0.0.1 > "$cs_dir/client" 2>&1
    local crc=$?
    wait $spid
    local src=$?
    cat "$cs_dir/server" "$cs_dir/client"
    check "rc_pingpong $label: server and client validated every byte" test $src = 0 -a $crc = 0
    check "rc_pingpong $label: served by monitor $want" \
          bash -c "grep -q 'monitor $want ' '$cs_dir/server' && grep -q 'monitor $want ' '$cs_dir/client'"
}

# The system install (make install: /usr/local unless configured otherwise).
# ZV_CAPI_PCDIR names another installed zverbs.pc's directory (deb-suite.sh:
# the package's, in Debian's multiarch directory).
cs_pc=${ZV_CAPI_PCDIR:-$(PKG_CONFIG_PATH=$b pkg-config --variable=libdir zverbs)/pkgconfig}
mkdir -p "$cs_dir/ex"
(cd "$cs_dir/ex" && PKG_CONFIG_PATH=$cs_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
    make -f "$s/contrib/examples/Makefile") > "$cs_dir/build" 2>&1
cs_rc=$?
cat "$cs_dir/build"
check "contrib/examples builds against the installed zverbs.pc ($cs_pc)" test $cs_rc = 0
if [ $cs_rc = 0 ]; then
    check "the example runs on the installed libzverbs.so.0" \
          bash -c "ldd '$cs_dir/ex/rc_pingpong' | grep -q 'libzverbs.so.0 => /'"
    cs_pingpong "uffd, direct system calls" uffd -- "$cs_dir/ex/rc_pingpong" -m uffd -n 100
    cs_pingpong "none, direct system calls" none -- "$cs_dir/ex/rc_pingpong" -m none -n 40
    cs_pingpong "ucm, libc calls" ucm -- "$cs_dir/ex/rc_pingpong" -m ucm -l -n 100
    cs_pingpong "auto (default), direct system calls" uffd -- "$cs_dir/ex/rc_pingpong" -n 40
    cs_port=$((cs_port + 1))
    timeout 180 "$cs_dir/ex/rc_pingpong" -m ucm -n 10 -d "$dev" -p $cs_port > "$cs_dir/server" 2>&1 &
    cs_spid=$!
    timeout 180 "$cs_dir/ex/rc_pingpong" -m ucm -n 10 -d "$dev" -p $cs_port 127.0.0.1 > "$cs_dir/client" 2>&1
    cs_crc=$?
    wait $cs_spid
    cs_src=$?
    grep -h 'stale data' "$cs_dir/server" "$cs_dir/client" | head -n 2
    check "negative control, ucm with direct system calls (unseen): the receivers report stale data, exit 1" \
          bash -c "[ $cs_src = 1 ] && [ $cs_crc = 1 ] && grep -q 'stale data' '$cs_dir/server' '$cs_dir/client'"
fi

# The unprivileged user's prefix install, if device-tests.sh made it.
if declare -F as_user > /dev/null && [ -f /home/zvuser/zv/lib/pkgconfig/zverbs.pc ]; then
    as_user mkdir -p /home/zvuser/ex
    as_user env PKG_CONFIG_PATH=/home/zvuser/zv/lib/pkgconfig \
        make -C /home/zvuser/ex -f "$s/contrib/examples/Makefile" > "$cs_dir/ubuild" 2>&1
    cs_rc=$?
    cat "$cs_dir/ubuild"
    check "the user builds contrib/examples against /home/zvuser/zv/lib/pkgconfig" test $cs_rc = 0
    if [ $cs_rc = 0 ]; then
        cs_pingpong "as the unprivileged user, prefix install, uffd" uffd \
            setpriv --reuid=zvuser --regid=zvuser --init-groups \
            env HOME=/home/zvuser LD_LIBRARY_PATH=/home/zvuser/zv/lib -- \
            /home/zvuser/ex/rc_pingpong -m uffd -n 40
    fi
fi

if [ -n "${suite_standalone:-}" ]; then
    echo "capi-suite: $pass passed, $fail failed"
    [ $fail = 0 ]
fi
