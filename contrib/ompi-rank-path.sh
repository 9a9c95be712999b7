#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Print the Open MPI component path that MPI ranks need to find the zverbs
# component: the directories given, Open MPI's pkglibdir (ompi_info --path
# pkglibdir), and ~/.openmpi/components where it exists.
# usage: contrib/ompi-rank-path.sh [--if-needed] [DIR...]
#        eval "$(contrib/ompi-rank-path.sh --env [DIR...])"
#
# Open MPI 5's mpirun (PRRTE) exports OMPI_MCA_mca_base_component_path,
# PMIx's component directory, to every rank, so the ranks search none of
# Open MPI's directories unless mpirun is given the path (`--mca
# mca_base_component_path PATH`, or OMPI_MCA_mca_base_component_path in
# mpirun's own environment; `-x` of it is overridden). Open MPI 4.1's ranks
# search its directories themselves: with --if-needed, nothing is printed
# there unless a DIR is given. --env (implies --if-needed) prints the shell
# line that exports it for every mpirun a script runs, or nothing. Only
# existing directories are named: each rank's PMIx reads the same variable
# and warns about one that is missing.
#
# PMIx takes OMPI_MCA_mca_base_component_path for its own component path
# too, unless PMIX_MCA_mca_base_component_path is set: given Open MPI's
# path alone, each rank's PMIx scans it and prints four lines per file
# that is not PMIx's ("mca:base:process_repository_item filename
# .../mca_rcache_zverbs has bad prefix - expected: pmix_mca_", Debian 13).
# --pmix prints PMIx's own directory (PMIx's libdir/pmix: pkg-config pmix,
# else where the loader finds libpmix), for `--pmixmca
# mca_base_component_path DIR`; --env exports it as
# PMIX_MCA_mca_base_component_path beside Open MPI's path.
#        contrib/ompi-rank-path.sh --pmix
set -eu
# PMIx's component directory, or nothing.
pmix_dir() {
    lib=$(pkg-config --variable=libdir pmix 2>/dev/null) || lib=
    so=
    if [ -z "$lib" ]; then
        so=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 ~ /^libpmix\.so\.[0-9]+$/ {print $NF; exit}')
        [ -z "$so" ] || lib=$(dirname "$(readlink -f "$so")")
    fi
    [ -n "$lib" ] && [ -d "$lib/pmix" ] && echo "$lib/pmix"
}
if_needed= env=
case ${1:-} in
--if-needed) if_needed=1; shift ;;
--env)       if_needed=1 env=1; shift ;;
--pmix)      pmix_dir || { echo "ompi-rank-path: PMIx's component directory not found (pkg-config pmix, ldconfig -p)" >&2; exit 1; }
             exit 0 ;;
esac
version=$(ompi_info --version 2>/dev/null | sed -n 's/^Open MPI v\([0-9][0-9]*\)\..*/\1/p' | head -n1)
[ -n "$version" ] || { echo "ompi-rank-path: ompi_info --version printed no Open MPI version" >&2; exit 1; }
if [ -n "$if_needed" ] && [ "$version" -lt 5 ] && [ $# = 0 ]; then
    exit 0
fi
pkglib=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
path=
for d in "$@" "$pkglib" "${HOME:-/nonexistent}/.openmpi/components"; do
    [ -d "$d" ] || continue
    case ":$path:" in *":$d:"*) continue ;; esac
    path=${path:+$path:}$d
done
if [ -n "$env" ]; then
    echo "export OMPI_MCA_mca_base_component_path='$path'"
    pmix=
    [ "$version" -lt 5 ] || pmix=$(pmix_dir) || pmix=
    [ -z "$pmix" ] || echo "export PMIX_MCA_mca_base_component_path='$pmix'"
else
    echo "$path"
fi
