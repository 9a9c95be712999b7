#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetch the UCX source tree of exactly the installed UCX version (for UCX's
# internal headers), from Debian's source package, without touching any
# system apt file: a deb-src list is derived from the system's own sources
# and used with a private apt state directory.
#
# usage: contrib/fetch-ucx-src.sh [DEST]   (default: $ZV_UCX_SRC_CACHE or
#        /var/cache/zverbs/ucx-src). Prints the source directory on stdout.
set -eu

dest=${1:-${ZV_UCX_SRC_CACHE:-/var/cache/zverbs/ucx-src}}
die() { echo "fetch-ucx-src: $*" >&2; exit 1; }

ver=$(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null) ||
    die "libucx-dev is not installed (run contrib/setup.sh)"
upstream=${ver#*:}; upstream=${upstream%-*}
srcdir=$dest/ucx-$ver

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

echo "fetch-ucx-src: fetching Debian source package ucx=$ver" >&2
apt-get "${apt_opts[@]}" -qq update >&2 ||
    die "apt-get update with a private deb-src list failed; give the UCX sources with --with-ucx-src=DIR instead"
work=$(mktemp -d "$dest/.src.XXXXXX")
( cd "$work" && apt-get "${apt_opts[@]}" -qq --download-only source "ucx=$ver" >&2 ) ||
    die "cannot download the source of ucx=$ver; give the UCX $upstream sources with --with-ucx-src=DIR"
dsc=$(ls "$work"/*.dsc)
rm -rf "$srcdir"
dpkg-source --no-check -x "$dsc" "$srcdir" >&2 ||
    die "dpkg-source failed to unpack $dsc"
rm -rf "$work"
[ -f "$srcdir/src/uct/base/uct_iface.h" ] || die "$srcdir has no src/uct/base/uct_iface.h"
touch "$srcdir/.zv-complete"
echo "$srcdir"
