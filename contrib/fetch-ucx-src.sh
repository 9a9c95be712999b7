#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The installed UCX's source tree: contrib/fetch-src.sh ucx [DEST].
exec "$(dirname "$0")/fetch-src.sh" ucx "$@"
