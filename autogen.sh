#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generate the configure script (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
autoreconf -fi
