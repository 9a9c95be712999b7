#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetch the source tree of exactly the installed UCX or Open MPI version,
# from Debian's source package, without touching any system apt file: a
# deb-src list is derived from the system's own sources and used with a
# private apt state directory. UCX's tree gives its internal headers; Open
# MPI's gives the headers Open MPI 5's installed component headers include
# but it does not install (opal/mca/threads/pthreads/*.h). The package is
# looked up by the installed SOURCE version (a binNMU such as Debian 13's
# 1.18.1+ds-2+b1 is built from source 1.18.1+ds-2). Where the source
# package cannot be had, configure takes a tree with --with-ucx-src=DIR or
# --with-ompi-src=DIR.
#
# usage: contrib/fetch-src.sh ucx|ompi [DEST]   (default: $ZV_UCX_SRC_CACHE
#        or /var/cache/zverbs/ucx-src; $ZV_OMPI_SRC_CACHE or
#        /var/cache/zverbs/ompi-src). Prints the source directory on stdout.
#        contrib/fetch-ucx-src.sh is `fetch-src.sh ucx`.
set -eu

what=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "fetch-src: $*" >&2; exit 1; }
ver=$("$here/src-version.sh" "$what" --installed) || exit 1
# 1:1.18.1+ds-2 -> 1.18.1 (no epoch, Debian revision, or repack suffix)
upstream=${ver#*:}; upstream=${upstream%-*}; upstream=${upstream%%+*}
case $what in
ucx)  name=UCX pkg=ucx option=--with-ucx-src check=src/uct/base/uct_iface.h
      dest=${2:-${ZV_UCX_SRC_CACHE:-/var/cache/zverbs/ucx-src}}
      upstream=${upstream%%~*}; tag=v$upstream ;;
ompi) name="Open MPI" pkg=openmpi option=--with-ompi-src
      check=opal/mca/threads/pthreads/threads_pthreads_mutex.h
      dest=${2:-${ZV_OMPI_SRC_CACHE:-/var/cache/zverbs/ompi-src}}
      upstream=${upstream/\~/}; tag=v$upstream ;;   # 6.0.0~rc2: tag v6.0.0rc2
esac
srcdir=$dest/$pkg-$ver
instead="give $name $upstream's source tree with $option=DIR instead (a checkout of $name's tag $tag)"

if [ -f "$srcdir/.zv-complete" ]; then
    echo "$srcdir"; exit 0
fi

command -v dpkg-source >/dev/null || die "dpkg-source missing (apt-get install dpkg-dev)"
mkdir -p "$dest"
state=$(mktemp -d "$dest/.apt.XXXXXX")
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/parts" "$state/lists/partial" "$state/cache/archives/partial" \
         "$state/prefs"

# Derive deb-src entries from every enabled system source (deb822 and one-line).
: > "$state/sources.list"
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # Rewrite "Types: deb" stanzas into deb-src ones; keep Signed-By etc.
    awk 'BEGIN{RS=""; ORS="\n\n"}
         /(^|\n)Types:[^\n]*deb([ \n]|$)/ && !/(^|\n)Enabled: *no/ {
             gsub(/Types:[^\n]*/, "Types: deb-src"); print }' "$f" \
        >> "$state/parts/system.sources"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -n 's/^[[:space:]]*deb[[:space:]]\+/deb-src /p' "$f" >> "$state/sources.list"
done

apt_opts=(-o "Dir::Etc::SourceList=$state/sources.list"
          -o "Dir::Etc::SourceParts=$state/parts"
          -o "Dir::Etc::Preferences=$state/prefs/none"
          -o "Dir::Etc::PreferencesParts=$state/prefs"
          -o "Dir::State::Lists=$state/lists"
          -o "Dir::Cache=$state/cache"
          -o "Dir::State::status=/var/lib/dpkg/status"
          -o "APT::Get::List-Cleanup=0"
          -o "APT::Sandbox::User=root")

echo "fetch-src: fetching Debian source package $pkg=$ver ($name $upstream)" >&2
apt-get "${apt_opts[@]}" -qq update >&2 ||
    die "apt-get update with a private deb-src list failed, so the source package $pkg=$ver cannot be looked for; $instead"
work=$(mktemp -d "$dest/.src.XXXXXX")
( cd "$work" && apt-get "${apt_opts[@]}" -qq --download-only source "$pkg=$ver" >&2 ) || {
    rm -rf "$work"
    die "the source package $pkg=$ver (of the installed $name $upstream) is not available from this system's apt sources; $instead"
}
dsc=$(ls "$work"/*.dsc)
rm -rf "$srcdir"
dpkg-source --no-check -x "$dsc" "$srcdir" >&2 ||
    die "dpkg-source failed to unpack $dsc"
rm -rf "$work"
[ -f "$srcdir/$check" ] || die "$srcdir has no $check"
touch "$srcdir/.zv-complete"
echo "$srcdir"
