#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The installed Open MPI's source tree: contrib/fetch-src.sh ompi [DEST].
exec "$(dirname "$0")/fetch-src.sh" ompi "$@"
