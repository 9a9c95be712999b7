#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's table of the Open MPI component's MCA parameters must be
# what src/util/text.h, the component's source of its names, defaults and
# help, says (docs never drift from the code).
set -eu
exec "${ZV_SRCDIR:?}/contrib/gen-mca-doc.sh" --check "$ZV_SRCDIR/README.md"
