#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Print the version (major.minor.patch) of a UCX source tree, or with
# --installed the Debian source package version of the installed UCX.
# usage: contrib/ucx-src-version.sh UCX_SRC_DIR
#        contrib/ucx-src-version.sh --installed
#
# --installed asks for the SOURCE version: a binary rebuild (binNMU) has a
# version of its own (Debian 13: libucx0 1.18.1+ds-2+b1, built from source
# ucx 1.18.1+ds-2), and only the source version names a source package.
set -eu
if [ "${1:-}" = --installed ]; then
    for p in libucx-dev libucx0; do
        v=$(dpkg-query -W -f='${source:Version}' "$p" 2>/dev/null) || continue
        [ -n "$v" ] && { echo "$v"; exit 0; }
    done
    echo "ucx-src-version: neither libucx-dev nor libucx0 is installed (run contrib/setup.sh)" >&2
    exit 1
fi
ac="$1/configure.ac"
[ -f "$ac" ] || { echo "ucx-src-version: $ac not found" >&2; exit 1; }
get() { sed -n "s/^define(\[ucx_ver_$1\], *\([0-9][0-9]*\)).*/\1/p" "$ac" | head -n1; }
major=$(get major); minor=$(get minor); patch=$(get patch)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
    { echo "ucx-src-version: no ucx_ver_major/minor/patch in $ac" >&2; exit 1; }
echo "$major.$minor.$patch"
