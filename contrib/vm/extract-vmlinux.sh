#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Extract the uncompressed ELF vmlinux from a bzImage (vmlinuz) to stdout.
#
# Usage: extract-vmlinux.sh VMLINUZ > vmlinux
#
# Same idea as the kernel's scripts/extract-vmlinux: look for the magic of
# each compressor the kernel may use, decompress from every hit, and keep
# the first result that is an ELF file. Exits 1 when nothing is found.
set -eu

img=${1:?usage: extract-vmlinux.sh VMLINUZ > vmlinux}
[ -r "$img" ] || { echo "extract-vmlinux: cannot read '$img'" >&2; exit 1; }

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# magic (grep -P byte pattern) and decompressor, in order of likelihood on Debian
try() {
    magic=$1; shift
    command -v "$1" >/dev/null 2>&1 || return 1
    for off in $(LC_ALL=C grep -obUaP "$magic" "$img" 2>/dev/null | cut -d: -f1); do
        # trailing bytes after the stream make the tools complain: ignore that
        tail -c "+$((off + 1))" "$img" | "$@" >"$tmp" 2>/dev/null || true
        if is_elf "$tmp"; then cat "$tmp"; return 0; fi
    done
    return 1
}

try '\xFD7zXZ\x00'      xz -dc ||
try '\x28\xB5\x2F\xFD'  zstd -dcq ||
try '\x1F\x8B\x08'      gzip -dc ||
try '\x5D\x00\x00\x00'  xz -dc --format=lzma ||
try '\x02\x21\x4C\x18'  lz4 -dc ||
try 'BZh'               bzip2 -dc ||
try '\x89\x4C\x5A'      lzop -dc ||
{ echo "extract-vmlinux: no compressed ELF kernel found in '$img'" >&2; exit 1; }
