#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build zverbs' Debian packages with Debian's own tools, from the release
# tarball: make dist, the tarball as zverbs_VERSION.orig.tar.gz, the
# packaging (contrib/debian) copied to debian/ in the unpacked tree, then
# dpkg-buildpackage (source and binary, unsigned) and lintian.
# usage: contrib/deb/build.sh     (after contrib/build.sh; as any user)
#   ZV_BUILDDIR  the configured build tree (default: build)
#   ZV_DEB_DIR   where the packages go (default: $ZV_BUILDDIR/deb)
#   ZV_UCX_SRC, ZV_OMPI_SRC  UCX's and Open MPI's source trees, where the
#                package registry does not serve them (configure's
#                --with-ucx-src, --with-ompi-src)
# Prints the .deb files made; exits non-zero if the build fails or lintian
# reports an error or a warning.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZV_BUILDDIR:-$repo/build}
out=${ZV_DEB_DIR:-$build/deb}

for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" >/dev/null ||
        { echo "deb: $tool is missing (contrib/setup.sh installs it)" >&2; exit 1; }
done

make -C "$build" dist >/dev/null
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$build/Makefile")
tarball=$build/zverbs-$version.tar.gz

rm -rf "$out"
mkdir -p "$out"
cp "$tarball" "$out/zverbs_$version.orig.tar.gz"
tar -C "$out" -xzf "$tarball"
src=$out/zverbs-$version
cp -r "$src/contrib/debian" "$src/debian"

# The module needs UCX's internal headers of exactly the installed UCX:
# fetched (or taken from the cache) here, once, rather than by the package
# build itself; or, where the registry does not serve UCX's source package,
# the tree ZV_UCX_SRC names (as configure's --with-ucx-src; ZV_OMPI_SRC
# likewise for Open MPI 5's headers, debian/rules passes both on).
ZV_UCX_SRC=${ZV_UCX_SRC:-$("$repo/contrib/fetch-ucx-src.sh")}
export ZV_UCX_SRC
export DEB_BUILD_OPTIONS="parallel=2 ${DEB_BUILD_OPTIONS:-}"

echo "deb: dpkg-buildpackage in $src (log: $out/build.log)"
if ! (cd "$src" && dpkg-buildpackage -us -uc) >"$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log"
    echo "deb: dpkg-buildpackage failed" >&2
    exit 1
fi
grep -E '^(PASS|FAIL|ERROR):' "$out/build.log" | sed 's/^/  /' || true

changes=$(ls "$out"/zverbs_"$version"-*_*.changes)
echo "deb: lintian $(basename "$changes")"
# Every tag that remains at any level is printed with its explanation; the
# overrides in contrib/debian say why each overridden one is right here.
lintian --info --display-info --fail-on error,warning "$changes" | sed 's/^/  /'
ls "$out"/*.deb
