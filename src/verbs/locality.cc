// SPDX-License-Identifier: BSD-3-Clause
// Device locality from hwloc (see locality.h).
#include "verbs/locality.h"

#include <hwloc/openfabrics-verbs.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <climits>

namespace zv::verbs {

namespace {

/// The process's topology: loaded once, released when the library is.
struct topology_holder {
    hwloc_topology_t topo = nullptr;

    topology_holder()
    {
        if (hwloc_topology_init(&topo) != 0) {
            ucs_diag("hwloc_topology_init() failed: %m; device locality unknown");
            topo = nullptr;
            return;
        }
        // Not needed for a NIC's place, and costly: GPU runtimes, and
        // libpciaccess (hwloc's Linux backend reads the PCI tree from sysfs
        // itself; libpciaccess's name database is never freed).
        for (const char *c : {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"}) {
            (void)hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
        }
        // OpenFabrics OS devices and their PCI functions ("important" I/O).
        if ((hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) ||
            (hwloc_topology_load(topo) != 0)) {
            ucs_diag("hwloc could not load this node's topology: %m; device locality unknown");
            hwloc_topology_destroy(topo);
            topo = nullptr;
        }
    }
    ~topology_holder()
    {
        if (topo != nullptr) {
            hwloc_topology_destroy(topo);
        }
    }
    topology_holder(const topology_holder &)            = delete;
    topology_holder &operator=(const topology_holder &) = delete;
};

/// The NUMA node object whose OS index is 'os_index', or null.
hwloc_obj_t numa_obj(hwloc_topology_t topo, int os_index)
{
    hwloc_obj_t n = nullptr;
    while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != nullptr) {
        if (static_cast<int>(n->os_index) == os_index) {
            return n;
        }
    }
    return nullptr;
}

/// The smallest NUMA distance from a CPU of 'binding' to node 'dev_node'
/// (hwloc's latency matrix between NUMA nodes), or -1 without a matrix.
long min_numa_distance(hwloc_topology_t topo, int dev_node, hwloc_const_cpuset_t binding)
{
    hwloc_obj_t target = numa_obj(topo, dev_node);
    if (target == nullptr) {
        return -1;
    }
    unsigned nr = 1;
    hwloc_distances_s *d = nullptr;
    if ((hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d,
                                     HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0) ||
        (nr == 0)) {
        return -1;
    }
    long best = LONG_MAX;
    int col   = -1;
    for (unsigned i = 0; i < d->nbobjs; ++i) {
        col = (d->objs[i] == target) ? static_cast<int>(i) : col;
    }
    for (unsigned i = 0; (col >= 0) && (i < d->nbobjs); ++i) {
        if (hwloc_bitmap_intersects(d->objs[i]->cpuset, binding)) {
            best = std::min<long>(best, static_cast<long>(d->values[i * d->nbobjs + col]));
        }
    }
    hwloc_distances_release(topo, d);
    return (best == LONG_MAX) ? -1 : best;
}

/// The OS device of network interface 'ifname', or null.
hwloc_obj_t network_osdev(hwloc_topology_t topo, const std::string &ifname)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr;
         o = hwloc_get_next_osdev(topo, o)) {
        if ((o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) && (o->name != nullptr) &&
            (ifname == o->name)) {
            return o;
        }
    }
    return nullptr;
}

} // namespace

hwloc_topology_t node_topology()
{
    static topology_holder holder; // thread safe, once
    return holder.topo;
}

locality find_device(hwloc_topology_t topo, const std::string &name, const std::string &netdev)
{
    locality loc;
    hwloc_obj_t os = (topo != nullptr) ? hwloc_ibv_get_device_osdev_by_name(topo, name.c_str()) :
                                         nullptr;
    if ((os == nullptr) && (topo != nullptr) && !netdev.empty()) {
        os = network_osdev(topo, netdev);
    }
    if (os == nullptr) {
        return loc;
    }
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, os);
    if ((near == nullptr) || (near->cpuset == nullptr)) {
        return loc;
    }
    loc.found = true;
    unsigned cpu;
    hwloc_bitmap_foreach_begin(cpu, near->cpuset) {
        loc.cpus.push_back(cpu);
    }
    hwloc_bitmap_foreach_end();
    if ((near->nodeset != nullptr) && (hwloc_bitmap_weight(near->nodeset) == 1)) {
        loc.numa_node = hwloc_bitmap_first(near->nodeset);
    }
    for (hwloc_obj_t p = os->parent; p != nullptr; p = p->parent) {
        if (p->type == HWLOC_OBJ_PCI_DEVICE) {
            loc.has_bus_id = true;
            loc.domain     = static_cast<uint16_t>(p->attr->pcidev.domain);
            loc.bus        = p->attr->pcidev.bus;
            loc.dev        = p->attr->pcidev.dev;
            loc.func       = p->attr->pcidev.func;
            break;
        }
    }
    return loc;
}

double remote_latency(hwloc_topology_t topo, const locality &loc, hwloc_const_cpuset_t binding)
{
    if (!loc.found || (topo == nullptr) || (binding == nullptr)) {
        return 0;
    }
    hwloc_bitmap_t local = hwloc_bitmap_alloc();
    if (local == nullptr) {
        return 0;
    }
    for (unsigned c : loc.cpus) {
        hwloc_bitmap_set(local, c);
    }
    const bool inside = hwloc_bitmap_isincluded(binding, local);
    hwloc_bitmap_free(local);
    if (inside) {
        return 0;
    }
    long d = (loc.numa_node >= 0) ? min_numa_distance(topo, loc.numa_node, binding) : -1;
    return (d >= 10) ? (d - 10) * 20e-9 : 200e-9;
}

bool bind_to_numa_node(void *addr, size_t len, int node)
{
    hwloc_topology_t topo = node_topology();
    hwloc_obj_t n         = ((node >= 0) && (topo != nullptr)) ? numa_obj(topo, node) : nullptr;
    if (n == nullptr) {
        return false;
    }
    // BIND, not strict: hwloc asks the kernel to prefer the node
    // (MPOL_PREFERRED_MANY where it has it: numa_maps says "prefer (many)"),
    // so a node that is full spills to another instead of failing.
    return hwloc_set_area_membind(topo, addr, len, n->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET) == 0;
}

hwloc_bitmap_t thread_binding(hwloc_topology_t topo)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if ((set == nullptr) || (topo == nullptr)) {
        return set;
    }
    if ((hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0) || hwloc_bitmap_iszero(set)) {
        hwloc_bitmap_copy(set, hwloc_topology_get_topology_cpuset(topo));
    }
    return set;
}

} // namespace zv::verbs
