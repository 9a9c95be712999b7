#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Main-job body, run on the device (inside the VM or on a real HCA).
set -eu
b=${ZV_BUILDDIR:?}
mod=$b/.libs/libuct_zv.so.0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "== verbs devices"
ibv_devinfo | grep -E 'hca_id|port:|state|active_mtu|link_layer'

# One table: what each transport reports for the same port.
LD_PRELOAD=$mod ucx_info -d > "$tmp/d" 2>&1
echo
echo "== transports on the same port (ucx_info -d, zv module preloaded)"
printf '%-10s %-10s %-14s %-12s %-16s\n' transport device "bandwidth MB/s" "latency ns" "device address"
awk '
/Transport:/      { tl=$3 }
/Device:/         { dev=$3 }
/bandwidth:/      { split($3, a, "/"); bw=a[1] }
/latency:/        { lat=$3 }
/device address:/ { if (dev ~ /:[0-9]+$/) printf "%-10s %-10s %-14s %-12s %-16s\n", tl, dev, bw, lat, $4 " bytes" }
' "$tmp/d"

echo
echo "== Open MPI: rcache zverbs component loads zv into every rank (no LD_PRELOAD)"
make -C "$b" install > "$tmp/install.log" 2>&1 || { tail "$tmp/install.log"; exit 1; }
ldconfig
ompi_info | grep -E 'MCA rcache: zverbs'
mpirun --allow-run-as-root -np 2 "$b/mpi-tests/zv_probe"
echo
echo "rc_zv has no data path yet (issue 4): no latency/bandwidth sweep to show."
