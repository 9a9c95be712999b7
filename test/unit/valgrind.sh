#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The unit tests under valgrind memcheck, every monitor mode (uffd,
# uffd_missing, ucm, none): any memcheck error or definite leak fails.
# Needs root: valgrind 3.19 has no userfaultfd syscall, so the kernel
# notifier opens /dev/userfaultfd instead (valgrind warns that it does not
# know that device's ioctl 0xaa00; it reports no error from it). The same
# tests skip under valgrind as natively (the intercept cannot see direct
# system calls; see the skip messages).
set -u
b=${ZV_BUILDDIR:?}
command -v valgrind >/dev/null || { echo "FAIL: valgrind not installed"; exit 1; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: valgrind + uffd needs root here"; exit 77
fi
exec valgrind -q --child-silent-after-fork=yes --error-exitcode=9 --leak-check=full \
    --errors-for-leak-kinds=definite "$b/test/unit/zv_unit"
