#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The kernel-notifier (uffd) cache and monitor tests under valgrind memcheck:
# any memcheck error or definite leak fails. Needs root (valgrind 3.19 has no
# userfaultfd syscall; the monitor then uses /dev/userfaultfd).
set -u
b=${ZV_BUILDDIR:?}
command -v valgrind >/dev/null || { echo "FAIL: valgrind not installed"; exit 1; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: valgrind + uffd needs root here"; exit 77
fi
exec valgrind -q --child-silent-after-fork=yes --error-exitcode=9 --leak-check=full \
    --errors-for-leak-kinds=definite \
    "$b/test/unit/zv_unit" --gtest_filter='*/uffd:*/uffd_missing:*uffd*'
