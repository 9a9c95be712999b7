// SPDX-License-Identifier: BSD-3-Clause
// Where a verbs device sits in the node: its CPUs, NUMA node and PCI
// address, from hwloc's topology (loaded once per process).
#ifndef ZV_VERBS_LOCALITY_H
#define ZV_VERBS_LOCALITY_H

#include <hwloc.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zv::verbs {

/// A device's place in the topology. A device hwloc does not place, and
/// whose network interface it does not place either, is 'found == false':
/// every CPU is as near as any other, and there is no bus id.
struct locality {
    bool                  found     = false;
    std::vector<unsigned> cpus;               ///< OS indexes of its local CPUs
    int                   numa_node = -1;     ///< OS index; -1: none or several
    bool                  has_bus_id = false; ///< a PCI function
    uint16_t              domain = 0;
    uint8_t               bus = 0, dev = 0, func = 0;
};

/// This node's topology with its I/O devices, loaded on first use and kept
/// for the life of the process (hwloc honours HWLOC_XMLFILE and the like);
/// null if hwloc cannot load it (the reason is logged once). Thread safe.
hwloc_topology_t node_topology();

/// Where the verbs device 'name' (e.g. mlx5_0) sits in 'topo' (may be null).
/// A device with no PCI function of its own (rxe, siw: RoCE or iWARP in
/// software over a network interface) is where the interface 'netdev' that
/// carries its traffic is, when one is given and hwloc places it: its
/// packets, and the copies into them, go through that NIC.
[[nodiscard]] locality find_device(hwloc_topology_t topo, const std::string &name,
                                   const std::string &netdev = {});

/// The extra latency UCP should see on a device at 'loc' for a process
/// bound to 'binding': 0 when every CPU of the binding is local to the
/// device (or the device has no locality), else the distance between the
/// NUMA nodes (hwloc's distance matrix: (distance - 10) x 20 ns, as UCX's
/// ib transports estimate it) or 200 ns without one.
[[nodiscard]] double remote_latency(hwloc_topology_t topo, const locality &loc,
                                    hwloc_const_cpuset_t binding);

/// Bind the pages of [addr, addr + len), not touched yet, to NUMA node
/// 'node' (OS index) of this node's topology: they are then allocated
/// there when first touched (registering them does). False, changing
/// nothing, when node < 0, the node is unknown or hwloc refuses.
bool bind_to_numa_node(void *addr, size_t len, int node);

/// The calling thread's CPU binding, as UCX reads it (sched_getaffinity):
/// all of the topology's CPUs when unbound or unreadable. The caller frees
/// it with hwloc_bitmap_free(); null only when out of memory.
hwloc_bitmap_t thread_binding(hwloc_topology_t topo);

} // namespace zv::verbs

#endif
