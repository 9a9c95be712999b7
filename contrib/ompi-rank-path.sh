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
set -eu
if_needed= env=
case ${1:-} in
--if-needed) if_needed=1; shift ;;
--env)       if_needed=1 env=1; shift ;;
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
else
    echo "$path"
fi
