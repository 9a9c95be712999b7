#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The configuration reference (contrib/doc/config.md, linked from the
# README) must be what ucx_info -f prints for the built module (docs never
# drift from the config tables).
set -eu
exec "${ZV_SRCDIR:?}/contrib/gen-config-doc.sh" --check "$ZV_SRCDIR/contrib/doc/config.md" \
    "${ZV_BUILDDIR:?}/.libs/libuct_zv.so.0"
