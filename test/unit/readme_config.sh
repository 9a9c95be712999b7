#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's configuration section must be what ucx_info -f prints for
# the built module (docs never drift from the config tables).
set -eu
exec "${ZV_SRCDIR:?}/contrib/gen-config-doc.sh" --check "$ZV_SRCDIR/README.md" \
    "${ZV_BUILDDIR:?}/.libs/libuct_zv.so.0"
