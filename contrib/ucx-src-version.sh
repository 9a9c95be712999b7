#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Print the version (major.minor.patch) of a UCX source tree.
# usage: contrib/ucx-src-version.sh UCX_SRC_DIR
set -eu
ac="$1/configure.ac"
[ -f "$ac" ] || { echo "ucx-src-version: $ac not found" >&2; exit 1; }
get() { sed -n "s/^define(\[ucx_ver_$1\], *\([0-9][0-9]*\)).*/\1/p" "$ac" | head -n1; }
major=$(get major); minor=$(get minor); patch=$(get patch)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
    { echo "ucx-src-version: no ucx_ver_major/minor/patch in $ac" >&2; exit 1; }
echo "$major.$minor.$patch"
