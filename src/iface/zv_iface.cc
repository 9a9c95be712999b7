// SPDX-License-Identifier: BSD-3-Clause
// The base UCT interface shared by the zv transports.
#include "iface/zv_iface.h"

#include "iface/check.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>

#include <cstring>
#include <vector>


namespace zv::iface {

ucs_status_t init(zv_iface *iface, const uct_iface_ops_t *ops,
                  uct_iface_internal_ops_t *internal_ops, uct_md_h md,
                  uct_worker_h worker, const uct_iface_params_t *params,
                  const uct_iface_config_t *config, const iface_settings &settings)
{
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("zv: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }
    // Before anything is built: a refused interface leaves nothing behind.
    ucs_status_t status = check_iface_params(params->mode.device.tl_name, params);
    if (status != UCS_OK) {
        return status;
    }

    md::zv_md *zmd               = md::from_uct(md);
    const verbs::port_info *port = md::find_port(zmd, params->mode.device.dev_name);
    if (port == nullptr) {
        ucs_error("zv: device %s is not an active port of %s",
                  params->mode.device.dev_name, zmd->dev.name().c_str());
        return UCS_ERR_NO_DEVICE;
    }

    // UCX's class initialiser for the base struct: called directly, since
    // our objects are not built through UCS_CLASS_NEW (see layout_check.h
    // for why the layouts are known to agree).
    // It copies the ops (a constant table here) into the interface.
    int init_count = 1;
    status         = uct_base_iface_t_init(&iface->super, &uct_base_iface_t_class,
                                           &init_count, const_cast<uct_iface_ops_t *>(ops),
                                           internal_ops, md, worker, params, config);
    if (status != UCS_OK) {
        return status;
    }
    iface->md       = zmd;
    iface->port     = port;
    iface->settings = settings;
    if (port->is_roce) {
        (void)iface->reach.init(port->gid.raw);
    }
    hwloc_topology_t topo = verbs::node_topology();
    hwloc_bitmap_t binding = verbs::thread_binding(topo);
    iface->remote_latency  = verbs::remote_latency(topo, zmd->locality, binding);
    hwloc_bitmap_free(binding);
    if (iface->remote_latency > 0) {
        ucs_debug("%s: this thread's CPUs are not all local to %s: %.0f ns added to "
                  "its latency", params->mode.device.dev_name, zmd->dev.name().c_str(),
                  iface->remote_latency * 1e9);
    }
    return UCS_OK;
}

namespace {

/// One batch of the interface's device events (a one-shot progress callback).
unsigned take_events(void *arg)
{
    auto *iface = static_cast<zv_iface *>(arg);
    verbs::async_event batch[verbs::async_dispatcher::batch_len];
    unsigned count = 0;
    size_t n;
    do {
        n = iface->md->events.take(iface->events_id, batch);
        for (size_t i = 0; i < n; ++i) {
            iface->on_event(iface, batch[i]);
        }
        count += static_cast<unsigned>(n);
    } while (n == verbs::async_dispatcher::batch_len);
    return count;
}

/// Called in the async thread by the md's dispatcher (under its lock):
/// schedule take_events() on the worker; the id cancels it at cleanup.
/// Straight into the worker's callback queue, which has a lock of its own
/// and runs its callbacks without it (as UCX's ib device dispatches its
/// events): not through uct_worker_progress_register_safe(), which blocks
/// the worker's async context, which UCP holds while it closes interfaces
/// (cleanup() takes the dispatcher's lock: the two would deadlock).
int schedule_events(void *arg)
{
    auto *iface = static_cast<zv_iface *>(arg);
    return ucx::oneshot_add(&iface->super.worker->super.progress_q, iface, take_events, iface);
}

} // namespace

ucs_status_t watch_events(zv_iface *iface, event_handler handler)
{
    iface->on_event  = handler;
    iface->events_id = iface->md->events.add(schedule_events, iface);
    if (iface->events_id < 0) {
        ucs_error("%s: no memory to watch the device's events", iface->md->dev.name().c_str());
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

void cleanup(zv_iface *iface)
{
    if (iface->events_id >= 0) {
        int token = iface->md->events.remove(iface->events_id);
        if (token != verbs::async_dispatcher::no_token) {
            ucx::oneshot_cancel(&iface->super.worker->super.progress_q, iface, token);
        }
        iface->events_id = -1;
    }
    ucs_class_call_cleanup_chain(&uct_base_iface_t_class, &iface->super, -1);
}

void report_ep_failure(zv_iface *iface, uct_ep_h ep, ucs_status_t status, const char *what)
{
    ucs_status_t handled = uct_iface_handle_ep_err(&iface->super.super, ep, status);
    ucs_log(uct_base_iface_failure_log_level(&iface->super, handled, status),
            "%s: %s: %s", iface->md->dev.name().c_str(), what, ucs_status_string(status));
}

void query_common(zv_iface *iface, uct_iface_attr_t *attr)
{
    uct_base_iface_query(&iface->super, attr);
    attr->device_addr_len      = sizeof(device_addr);
    attr->bandwidth.dedicated  = 0;
    attr->bandwidth.shared     = iface->port->bandwidth;
    attr->latency.c            = iface->port->latency + iface->remote_latency;
    attr->latency.m            = 0;
    attr->overhead             = 75e-9;
    attr->priority             = 0;
    if (attr->max_num_eps == UCS_ULUNITS_AUTO) {
        attr->max_num_eps = iface->auto_max_eps;
    }
}

void set_auto_max_eps(zv_iface *iface, const conn_cost &cost, const char *tl_name)
{
    const char *source;
    node_share share;
    share.mem_bytes    = node_memory();
    share.max_qp       = static_cast<uint64_t>(iface->md->dev.attr().orig_attr.max_qp);
    share.local_procs  = local_processes(&source);
    iface->auto_max_eps = max_connections(cost, share);
    ucs_debug("%s: max_num_eps auto = %zu: %zu bytes per peer (%u qp, %u send wr of %zu "
              "bytes), 1/%u of %lu MiB memory and 1/%u of max_qp %lu, shared by %u local "
              "processes (%s)", tl_name, iface->auto_max_eps, peer_bytes(cost), cost.qps,
              cost.sq_wrs, cost.wqe_bytes, mem_share_div, share.mem_bytes >> 20,
              qp_share_div, share.max_qp, share.local_procs, source);
}

ucs_status_t ep_create_allowed(const uct_ep_params_t *params, zv_iface *iface)
{
    const uint64_t need = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                          UCT_EP_PARAM_FIELD_IFACE_ADDR;
    if (((params->field_mask & need) != need) || (iface == nullptr)) {
        ucs_error("%s: endpoints connect to an interface: the device and "
                  "interface addresses are required",
                  (iface != nullptr) ? iface->tl_name : "zv");
        return UCS_ERR_INVALID_PARAM;
    }
    if (iface->device_lost) {
        ucs_error("%s: %s is lost (device fatal event): no new endpoints", iface->tl_name,
                  iface->md->dev.name().c_str());
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t get_device_address(uct_iface_h uct_iface, uct_device_addr_t *addr)
{
    auto *iface = reinterpret_cast<zv_iface *>(uct_iface);
    device_addr da{};
    da.flags = iface->port->is_roce ? 1 : 0;
    da.lid   = iface->port->attr.lid;
    std::memcpy(da.gid, iface->port->gid.raw, sizeof(da.gid));
    std::memcpy(addr, &da, sizeof(da));
    return UCS_OK;
}

int is_reachable(const uct_iface_h iface, const uct_device_addr_t *dev_addr,
                 const uct_iface_addr_t *)
{
    return (dev_addr != nullptr) &&
           is_device_reachable(reinterpret_cast<zv_iface *>(iface), dev_addr);
}

int is_device_reachable(zv_iface *iface, const uct_device_addr_t *addr)
{
    return is_device_reachable(iface, addr, ucx::reach_reason{});
}

int is_device_reachable(zv_iface *iface, const uct_device_addr_t *addr,
                        const ucx::reach_reason &why)
{
    device_addr da;
    std::memcpy(&da, addr, sizeof(da));
    bool roce = (da.flags & 1) != 0;
    if (roce != iface->port->is_roce) {
        why.say("%s: link layer differs (peer %s, %s here)", iface->tl_name,
                roce ? "Ethernet" : "InfiniBand",
                iface->port->is_roce ? "Ethernet" : "InfiniBand");
        return 0;
    }
    if (!roce) {
        // Same IB subnet: equal GID subnet prefix.
        if (std::memcmp(da.gid, iface->port->gid.raw, 8) != 0) {
            why.say("%s: other InfiniBand subnet (GID prefix differs)", iface->tl_name);
            return 0;
        }
        return 1;
    }
    if (!iface->reach.reachable(da.gid)) {
        why.say("%s: no route from %s to the peer's RoCE GID", iface->tl_name,
                iface->md->dev.name().c_str());
        return 0;
    }
    return 1;
}

bool same_device(const device_addr &a, const device_addr &b)
{
    if ((a.flags & 1) != (b.flags & 1)) {
        return false;
    }
    if (a.flags & 1) {
        // RoCE: the whole GID names the port.
        return std::memcmp(a.gid, b.gid, sizeof(a.gid)) == 0;
    }
    // InfiniBand: the LID and the GID's interface id (as UCX's ib transports).
    return (a.lid == b.lid) && (std::memcmp(a.gid + 8, b.gid + 8, 8) == 0);
}

bool same_device(const device_addr &a, const uct_device_addr_t *b)
{
    device_addr db;
    std::memcpy(&db, b, sizeof(db));
    return same_device(a, db);
}

int is_reachable_v2(uct_iface_h uct_iface, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *, bool same_dev, const ucx::reach_reason &why)
{
    auto *iface = reinterpret_cast<zv_iface *>(uct_iface);
    if (dev_addr == nullptr) {
        why.say("%s: no device address", iface->tl_name);
        return 0;
    }
    if (!is_device_reachable(iface, dev_addr, why)) {
        return 0;
    }
    if (same_dev) {
        device_addr here;
        get_device_address(uct_iface, reinterpret_cast<uct_device_addr_t *>(&here));
        if (!same_device(here, dev_addr)) {
            why.say("%s: the same device is expected in device reachability scope",
                    iface->tl_name);
            return 0;
        }
    }
    return 1;
}

void progress_disable(uct_iface_h iface, unsigned flags)
{
    uct_base_iface_progress_disable(iface, flags);
}

ucs_status_t estimate_perf(uct_iface_h iface, uct_perf_attr_t *perf_attr)
{
    return uct_base_iface_estimate_perf(iface, perf_attr);
}

void vfs_refresh(uct_iface_h) {}

ucs_status_t ep_query(uct_ep_h, uct_ep_attr_t *) { return UCS_ERR_UNSUPPORTED; }

} // namespace zv::iface
