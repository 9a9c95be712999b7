#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# configure must refuse UCX sources that do not match the installed UCX:
# another version, or headers whose struct layout differs from libuct's.
set -u
s=${ZV_SRCDIR:?}; b=${ZV_BUILDDIR:?}
real=$(sed -n "s/^UCX_SRC = //p" "$b/Makefile")
# The UCX this build was configured against (--with-ucx=DIR, or the system's).
ucx_dir=$(sed -n "s/^UCX_DIR = //p" "$b/Makefile")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { local name=$1; shift
    if "$@"; then echo "PASS: $name"; pass=$((pass+1)); else echo "FAIL: $name"; fail=$((fail+1)); fi; }

installed=$(sed -n "s/^UCX_VERSION = //p" "$b/Makefile")
other_minor=$(( $(echo "$installed" | cut -d. -f2) - 1 ))
other=$(echo "$installed" | cut -d. -f1).$other_minor.$(echo "$installed" | cut -d. -f3)

# 1. Another version (the real tree with its minor version one less).
mkdir -p "$tmp/v/src"
cp -r "$real/src/uct" "$real/src/ucs" "$tmp/v/src/"
sed "s/^define(\[ucx_ver_minor\], *[0-9]*)/define([ucx_ver_minor], $other_minor)/" \
    "$real/configure.ac" > "$tmp/v/configure.ac"
mkdir "$tmp/b1"
(cd "$tmp/b1" && "$s/configure" ${ucx_dir:+--with-ucx="$ucx_dir"} --with-ucx-src="$tmp/v" >out 2>&1); rc=$?
check "other UCX version: configure fails" test $rc != 0
check "other UCX version: message names both versions" \
      grep -q "UCX version mismatch: the sources in .* are UCX $other but the installed UCX .* is $installed" "$tmp/b1/out"

# 2. Same version, but uct_base_iface_t grew a field.
mkdir -p "$tmp/l/src"
cp -r "$real/src/uct" "$real/src/ucs" "$tmp/l/src/"
cp "$real/configure.ac" "$tmp/l/"
sed -i 's/^typedef struct uct_base_iface {/&\n    char zv_test_extra[64];/' \
    "$tmp/l/src/uct/base/uct_iface.h"
mkdir "$tmp/b2"
(cd "$tmp/b2" && "$s/configure" ${ucx_dir:+--with-ucx="$ucx_dir"} --with-ucx-src="$tmp/l" >out 2>&1); rc=$?
check "layout mismatch: configure fails" test $rc != 0
check "layout mismatch: message names the struct and sizes" \
      grep -q 'UCX layout mismatch: sizeof(uct_base_iface_t) is [0-9]* in the headers but [0-9]* in libuct' "$tmp/b2/out"

echo "configure_mismatch: $pass passed, $fail failed"
[ $fail = 0 ]
