#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Print the version of a UCX or Open MPI source tree, or with --installed
# the Debian source package version of the installed one.
# usage: contrib/src-version.sh ucx|ompi SRC_DIR
#        contrib/src-version.sh ucx|ompi --installed
#
# A tree's version is major.minor.patch, as the installed one's pkg-config
# reports it (UCX 1.18.1, Open MPI 5.0.7), for configure to compare. Open
# MPI's release-candidate suffix is left out: its git tags keep greek=rc2
# in VERSION even for a release (v5.0.7's does), so a checkout cannot tell
# 6.0.0rc2 from 6.0.0. --installed asks for the SOURCE version: a
# binary rebuild (binNMU) has a version of its own (Debian 13: libucx0
# 1.18.1+ds-2+b1, built from source ucx 1.18.1+ds-2), and only the source
# version names a source package.
set -eu
what=${1:-}
case $what in
ucx)  pkgs="libucx-dev libucx0" ;;
ompi) pkgs="libopenmpi-dev libopenmpi40 libopenmpi3" ;;
*)    echo "usage: $0 ucx|ompi SRC_DIR|--installed" >&2; exit 2 ;;
esac
die() { echo "src-version: $*" >&2; exit 1; }
if [ "${2:-}" = --installed ]; then
    for p in $pkgs; do
        v=$(dpkg-query -W -f='${source:Version}' "$p" 2>/dev/null) || continue
        [ -n "$v" ] && { echo "$v"; exit 0; }
    done
    die "none of $pkgs is installed (run contrib/setup.sh)"
fi
dir=${2:?usage: $0 ucx|ompi SRC_DIR|--installed}
if [ "$what" = ucx ]; then
    f=$dir/configure.ac
    get() { sed -n "s/^define(\[ucx_ver_$1\], *\([0-9][0-9]*\)).*/\1/p" "$f" | head -n1; }
    keys="major minor patch"
else
    f=$dir/VERSION   # major=5, minor=0, release=7
    get() { sed -n "s/^$1=\([0-9A-Za-z]*\)\$/\1/p" "$f" | head -n1; }
    keys="major minor release"
fi
[ -f "$f" ] || die "$f not found"
set -- $keys
major=$(get "$1"); minor=$(get "$2"); patch=$(get "$3")
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
    die "no $keys in $f"
echo "$major.$minor.$patch"
