#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libzverbs as a user gets it, without an RDMA device: the library, header and
# zverbs.pc installed (into a staging DESTDIR), contrib/examples built with
# pkg-config --cflags --libs zverbs, only zv_* exported, the soname, and the
# example failing cleanly (an error, no crash) where there is no device.
set -u
b=${ZV_BUILDDIR:?}; s=${ZV_SRCDIR:?}
pass=0; fail=0
check() { # name, then a command that must succeed
    local name=$1; shift
    if "$@"; then echo "PASS: $name"; pass=$((pass+1))
    else echo "FAIL: $name"; fail=$((fail+1)); fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

make -C "$b" DESTDIR="$tmp/root" install-libLTLIBRARIES install-zverbsincludeHEADERS \
    install-pkgconfigDATA > "$tmp/install.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -n 20 "$tmp/install.log"
check "library, header and zverbs.pc install" test $rc = 0
pc=$(find "$tmp/root" -name zverbs.pc | head -n1)
lib=$(find "$tmp/root" -name libzverbs.so.0 | head -n1)
check "zverbs.pc is installed in LIBDIR/pkgconfig" test -n "$pc"
check "libzverbs.so.0 is installed" test -n "$lib"
[ -n "$pc" ] && [ -n "$lib" ] || { echo "capi_install: $pass passed, $fail failed"; exit 1; }
check "the header is under INCLUDEDIR/zverbs" test -n "$(find "$tmp/root" -path '*/include/zverbs/zverbs.h')"

check "soname libzverbs.so.0" bash -c "objdump -p '$lib' | grep -q 'SONAME *libzverbs.so.0'"
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' > "$tmp/syms"
check "exports zv_* only (and its version node)" \
      bash -c "test -s '$tmp/syms' && ! grep -vE '^(zv_|ZVERBS_)' '$tmp/syms'"
check "exports the whole API" grep -qx zv_cache_open "$tmp/syms"
ldd "$lib" > "$tmp/ldd"
check "links libibverbs, libucs and libucm, nothing unresolved" \
      bash -c "grep -q libibverbs '$tmp/ldd' && grep -q libucm '$tmp/ldd' && grep -q libucs '$tmp/ldd' &&
               ! grep -q 'not found' '$tmp/ldd' && ! grep -qE 'libuct|libucp' '$tmp/ldd'"

mkdir "$tmp/ex"
(cd "$tmp/ex" && PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$tmp/root" \
    make -f "$s/contrib/examples/Makefile") > "$tmp/ex.log" 2>&1
rc=$?
cat "$tmp/ex.log"
check "contrib/examples builds with pkg-config --cflags --libs zverbs (C99, -Werror)" test $rc = 0
if [ $rc = 0 ]; then
    LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/ex/rc_pingpong" -n 1 > "$tmp/run.log" 2>&1
    rc=$?
    cat "$tmp/run.log"
    if ibv_devices 2>/dev/null | awk 'NR>2' | grep -q .; then
        echo "SKIP: a verbs device is present (the device tier runs the example)"
    else
        check "without a device the example exits 1 with a message" \
              bash -c "test $rc = 1 && grep -q 'rc_pingpong: ' '$tmp/run.log'"
    fi
fi
echo "capi_install: $pass passed, $fail failed"
[ $fail = 0 ]
