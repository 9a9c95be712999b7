#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The configuration reference (contrib/doc/config.md, linked from the
# README) must be what ucx_info -f prints for the built module (docs never
# drift from the config tables).
set -eu
# The ucx_info of the UCX configure found (--with-ucx=DIR: that prefix's).
UCX_INFO=$(sed -n 's/^UCX_INFO = //p' "${ZV_BUILDDIR:?}/Makefile")
export UCX_INFO=${UCX_INFO:-ucx_info}
exec "${ZV_SRCDIR:?}/contrib/gen-config-doc.sh" --check "$ZV_SRCDIR/contrib/doc/config.md" \
    "${ZV_BUILDDIR:?}/.libs/libuct_zv.so.0"
