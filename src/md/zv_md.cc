// SPDX-License-Identifier: BSD-3-Clause
// The zv memory domain: device enumeration, registration, rkey pack/unpack.
#include "md/zv_md.h"
#include "monitor/monitor.h"
#include "ucx/compat.h"
#include "util/nothrow.h"

#include <ucs/async/async_fwd.h>
#include <ucs/debug/log_def.h>
#include <ucs/sys/topo/base/topo.h>

#include <arpa/inet.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>

namespace zv::md {

namespace {

/// The device's async fd is readable: read every event, log it the way
/// UCX logs its own devices' events, acknowledge it and hand it to the
/// interfaces. Runs in UCX's async thread.
void read_async_events(int fd, ucs_event_set_types_t, void *arg)
{
    zv_md *md = static_cast<zv_md *>(arg);
    ibv_async_event ev;
    while (ibv_get_async_event(md->dev.ctx(), &ev) == 0) {
        verbs::async_event e = verbs::translate(ev);
        ibv_ack_async_event(&ev);
        char what[160];
        verbs::describe(e, what, sizeof(what));
        ucs_log(verbs::log_level(e), "%s: async event: %s", md->dev.name().c_str(), what);
        md->events.deliver(e);
    }
    (void)fd;
}

ucs_status_t watch_async_events(zv_md *md)
{
    int fd    = md->dev.ctx()->async_fd;
    int flags = fcntl(fd, F_GETFL);
    if ((flags < 0) || (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        ucs_error("%s: cannot make the async event fd non-blocking: %m",
                  md->dev.name().c_str());
        return UCS_ERR_IO_ERROR;
    }
    ucs_status_t status = ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_SPINLOCK, fd,
                                                      UCS_EVENT_SET_EVREAD,
                                                      read_async_events, md, nullptr);
    if (status != UCS_OK) {
        ucs_error("%s: cannot watch the device's async events: %s",
                  md->dev.name().c_str(), ucs_status_string(status));
        return status;
    }
    md->events_registered = true;
    return UCS_OK;
}

void close_md(uct_md_h uct_md)
{
    zv_md *md = from_uct(uct_md);
    if (md->events_registered) {
        // Waits for a handler that is running: none runs after this.
        (void)ucs_async_remove_handler(md->dev.ctx()->async_fd, 1);
    }
    if (md->cache != nullptr) {
        // One line of what the cache did, for UCX_LOG_LEVEL=diag.
        const rcache::cache_stats s = md->cache->stats();
        ucs_diag("%s: registration cache (%s): %lu registrations, %lu misses, %lu evicted, "
                 "%lu invalidated, %lu retried after evicting idle regions, %lu failed",
                 md->dev.name().c_str(), md->cache->mode_name(),
                 static_cast<unsigned long>(s.registrations),
                 static_cast<unsigned long>(s.misses), static_cast<unsigned long>(s.evictions),
                 static_cast<unsigned long>(s.invalidations),
                 static_cast<unsigned long>(s.reg_retries),
                 static_cast<unsigned long>(md->reg_failures.load()));
        rcache::cache::destroy(md->cache);
    }
    delete md->backend;
    delete md;
}

// CPUs near the device, from hwloc; all CPUs when it has no locality (rxe).
void local_cpus(const verbs::locality &loc, ucs_cpu_set_t *set)
{
    UCS_CPU_ZERO(set);
    for (unsigned c : loc.cpus) {
        if (c < UCS_CPU_SETSIZE) {
            UCS_CPU_SET(c, set);
        }
    }
    if (!loc.found || loc.cpus.empty()) {
        for (int c = 0; c < UCS_CPU_SETSIZE; ++c) {
            UCS_CPU_SET(c, set);
        }
    }
}

ucs_status_t query_md(uct_md_h uct_md, ucx::md_caps *caps)
{
    zv_md *md = from_uct(uct_md);

    caps->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_NEED_RKEY;
    caps->max_reg          = md->dev.attr().orig_attr.max_mr_size;
    caps->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    caps->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    caps->reg_cost.c       = md->settings.reg_cost_overhead;
    caps->reg_cost.m       = md->settings.reg_cost_growth;
    caps->rkey_packed_size = sizeof(packed_rkey);
    caps->component_name   = md->super.component->name;
    caps->device_name      = md->dev.name().c_str();
    local_cpus(md->locality, &caps->local_cpus);
    return UCS_OK;
}

// Access flags no wider than the use: local write is needed for receive
// buffers and RDMA READ targets; remote access only when UCP asks for it.
int access_flags(uint64_t uct_flags)
{
    int access = IBV_ACCESS_LOCAL_WRITE;
    if (uct_flags & UCT_MD_MEM_ACCESS_REMOTE_PUT) {
        access |= IBV_ACCESS_REMOTE_WRITE;
    }
    if (uct_flags & UCT_MD_MEM_ACCESS_REMOTE_GET) {
        access |= IBV_ACCESS_REMOTE_READ;
    }
    if (uct_flags & UCT_MD_MEM_ACCESS_REMOTE_ATOMIC) {
        access |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_WRITE;
    }
    return access;
}

ucs_status_t mem_reg(uct_md_h uct_md, void *address, size_t length, uint64_t flags,
                     uct_mem_h *memh_p)
{
    zv_md *md = from_uct(uct_md);
    rcache::region *r;
    ucs_status_t status = md->cache->get(address, length, access_flags(flags), &r);
    if (status != UCS_OK) {
        md->reg_failures.fetch_add(1, std::memory_order_relaxed);
        ucs_log((flags & UCT_MD_MEM_FLAG_HIDE_ERRORS) ? UCS_LOG_LEVEL_DEBUG :
                                                        UCS_LOG_LEVEL_ERROR,
                "%s: cannot register address=%p length=%zu: %s",
                md->dev.name().c_str(), address, length, ucs_status_string(status));
        return status;
    }
    *memh_p = r;
    return UCS_OK;
}

ucs_status_t mem_dereg(uct_md_h uct_md, const uct_md_mem_dereg_params_t *params)
{
    zv_md *md = from_uct(uct_md);
    if (!(params->field_mask & UCT_MD_MEM_DEREG_FIELD_MEMH) ||
        (params->memh == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->field_mask & UCT_MD_MEM_DEREG_FIELD_FLAGS) &&
        (params->flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE)) {
        return UCS_ERR_UNSUPPORTED;
    }
    md->cache->put(static_cast<memh *>(params->memh));
    return UCS_OK;
}

ucs_status_t mkey_pack(uct_md_h, uct_mem_h uct_memh, void *buffer)
{
    const auto *mh = static_cast<const memh *>(uct_memh);
    packed_rkey packed{mh->rkey()};
    std::memcpy(buffer, &packed, sizeof(packed));
    return UCS_OK;
}

// Set member by member by the compatibility layer: the ops' order and
// signatures differ between UCX versions.
uct_md_ops_t md_ops = ucx::make_md_ops<close_md, query_md, mem_reg, mem_dereg, mkey_pack>();

} // namespace

namespace {

/// query_md_resources() but for running out of memory, which it may throw
/// (what it holds until then are its locals).
ucs_status_t list_md_resources(uct_md_resource_desc_t **resources_p, unsigned *num_resources_p)
{
    std::vector<std::string> names;
    ucs_status_t status = verbs::device_names(names);
    if (status != UCS_OK) {
        return status;
    }

    // One md per device that has at least one active port.
    std::vector<std::string> usable;
    for (const auto &name : names) {
        verbs::device dev;
        if ((verbs::device::open(name, -1, dev) == UCS_OK) && !dev.ports().empty()) {
            usable.push_back(name);
        }
    }

    auto *res = static_cast<uct_md_resource_desc_t *>(
            std::calloc(usable.size() + 1, sizeof(uct_md_resource_desc_t)));
    if (res == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < usable.size(); ++i) {
        std::snprintf(res[i].md_name, sizeof(res[i].md_name), "%s",
                      usable[i].c_str());
    }
    *resources_p     = res;
    *num_resources_p = static_cast<unsigned>(usable.size());
    return UCS_OK;
}

} // namespace

ucs_status_t query_md_resources(uct_component_t *, uct_md_resource_desc_t **resources_p,
                                unsigned *num_resources_p)
{
    ucs_status_t       status = UCS_OK;
    const ucs_status_t alloc  = util::try_alloc(
            [&] { status = list_md_resources(resources_p, num_resources_p); });
    return (alloc == UCS_OK) ? status : alloc;
}

namespace {

/// The device's place in the node, and the system device UCP knows it by:
/// its PCI function, or for a software RoCE device (rxe) the function of
/// the NIC under its first port's GID.
void find_locality(zv_md *md)
{
    const char *name   = md->dev.name().c_str();
    std::string netdev = md->dev.ports().empty() ?
                                 std::string() :
                                 verbs::port_netdev(md->dev.ctx(), md->dev.ports().front());
    md->locality   = verbs::find_device(verbs::node_topology(), md->dev.name(), netdev);
    md->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    const verbs::locality &loc = md->locality;
    if (!loc.found) {
        ucs_debug("%s: neither it nor its network interface '%s' is in hwloc's topology "
                  "(no PCI function): no locality, system device unknown",
                  name, netdev.c_str());
        return;
    }
    if (loc.has_bus_id) {
        ucs_sys_bus_id_t id = {loc.domain, loc.bus, loc.dev, loc.func};
        if (ucs_topo_find_device_by_bus_id(&id, &md->sys_device) == UCS_OK) {
            (void)ucx::set_sys_device_name(md->sys_device, name);
        } else {
            md->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
        }
    }
    ucs_debug("%s: %zu local CPUs, NUMA node %d, PCI %04x:%02x:%02x.%x, system device %d",
              name, loc.cpus.size(), loc.numa_node, loc.domain, loc.bus, loc.dev, loc.func,
              static_cast<int>(md->sys_device));
}

} // namespace

ucs_status_t open(uct_component_t *component, const char *md_name,
                  const md_settings &settings, uct_md_h *md_p)
{
    auto *md = new (std::nothrow) zv_md{};
    if (md == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    // (device::open() holds what it opened in its own device until it
    // succeeds: running out of memory leaves nothing to release but md.)
    ucs_status_t       status = UCS_OK;
    const ucs_status_t alloc  = util::try_alloc(
            [&] { status = verbs::device::open(md_name, settings.gid_index, md->dev); });
    if ((alloc != UCS_OK) || (status != UCS_OK)) {
        delete md;
        return (alloc != UCS_OK) ? alloc : status;
    }
    md->super.ops       = &md_ops;
    md->super.component = component;
    md->settings        = settings;
    status = rcache::ibv_backend::create(md->dev.pd(), settings.rcache.odp,
                                         rcache::k_odp_rc | rcache::k_odp_uc |
                                         rcache::k_odp_ud, &md->backend);
    if (status == UCS_OK) {
        status = rcache::cache::create(settings.rcache, md->backend,
                                       monitor::global(), md_name, &md->cache);
    }
    if (status != UCS_OK) {
        ucs_error("%s: cannot create the registration cache: %s", md_name,
                  ucs_status_string(status));
        close_md(&md->super);
        return status;
    }
    status = watch_async_events(md);
    if (status != UCS_OK) {
        close_md(&md->super);
        return status;
    }
    status = util::try_alloc([&] { find_locality(md); });
    if (status != UCS_OK) {
        close_md(&md->super);
        return status;
    }
    ucs_debug("%s: registration cache mode %s (monitor %s)", md_name,
              md->cache->mode_name(), monitor::active_name());
    for (const auto &p : md->dev.ports()) {
        char gid[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, p.gid.raw, gid, sizeof(gid));
        ucs_debug("%s:%u: %s, active mtu %u, %.0f MB/s, gid[%d] %s", md_name,
                  p.port_num, p.is_roce ? "RoCE" : "InfiniBand", p.mtu_bytes,
                  p.bandwidth / 1e6, p.gid_index, gid);
    }
    *md_p = &md->super;
    return UCS_OK;
}

ucs_status_t rkey_unpack(uct_component_t *, const void *rkey_buffer,
                         uct_rkey_t *rkey_p, void **handle_p)
{
    packed_rkey packed;
    std::memcpy(&packed, rkey_buffer, sizeof(packed));
    *rkey_p   = packed.rkey;
    *handle_p = nullptr;
    return UCS_OK;
}

ucs_status_t rkey_release(uct_component_t *, uct_rkey_t, void *)
{
    return UCS_OK;
}

const verbs::port_info *find_port(const zv_md *md, const char *dev_name)
{
    const std::string &name = md->dev.name();
    size_t len              = name.size();
    if ((std::strncmp(dev_name, name.c_str(), len) != 0) || (dev_name[len] != ':')) {
        return nullptr;
    }
    char *end;
    errno         = 0;
    long port_num = std::strtol(dev_name + len + 1, &end, 10);
    if ((errno != 0) || (*end != '\0') || (port_num <= 0) || (port_num > 255)) {
        return nullptr;
    }
    return md->dev.port(static_cast<uint8_t>(port_num));
}

ucs_status_t query_port_devices(uct_md_h uct_md, uct_tl_device_resource_t **devices_p,
                                unsigned *num_devices_p, const char *srq_tl)
{
    const zv_md *md  = from_uct(uct_md);
    const auto &ports = md->dev.ports();
    const char *why;
    if ((srq_tl != nullptr) && !verbs::srq_usable(md->dev.attr().orig_attr, &why)) {
        ucs_debug("%s: %s is not offered: %s (ud_zv is)", md->dev.name().c_str(), srq_tl,
                  why);
        *devices_p     = nullptr;
        *num_devices_p = 0;
        return UCS_OK;
    }
    auto *devs = static_cast<uct_tl_device_resource_t *>(
            std::calloc(ports.size() + 1, sizeof(uct_tl_device_resource_t)));
    if (devs == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < ports.size(); ++i) {
        std::snprintf(devs[i].name, sizeof(devs[i].name), "%s:%u",
                      md->dev.name().c_str(), ports[i].port_num);
        devs[i].type       = UCT_DEVICE_TYPE_NET;
        devs[i].sys_device = md->sys_device;
    }
    *devices_p     = devs;
    *num_devices_p = static_cast<unsigned>(ports.size());
    return UCS_OK;
}

} // namespace zv::md
