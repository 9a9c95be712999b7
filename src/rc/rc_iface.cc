// SPDX-License-Identifier: BSD-3-Clause
// rc_zv interface: resource setup and attributes.
#include "rc/rc_iface.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <new>

namespace zv::rc {

namespace {

rc_iface *to_rc(uct_iface_h iface) { return reinterpret_cast<rc_iface *>(iface); }

void destroy(rc_iface *iface)
{
    const char *dev = iface->super.md->dev.name().c_str();
    if ((iface->srq != nullptr) && (ibv_destroy_srq(iface->srq) != 0)) {
        ucs_warn("%s: ibv_destroy_srq() failed: %m", dev);
    }
    if ((iface->recv_cq != nullptr) && (ibv_destroy_cq(iface->recv_cq) != 0)) {
        ucs_warn("%s: ibv_destroy_cq(recv) failed: %m", dev);
    }
    if ((iface->send_cq != nullptr) && (ibv_destroy_cq(iface->send_cq) != 0)) {
        ucs_warn("%s: ibv_destroy_cq(send) failed: %m", dev);
    }
}

void iface_close(uct_iface_h uct_iface)
{
    rc_iface *iface = to_rc(uct_iface);
    destroy(iface);
    iface::cleanup(&iface->super);
    delete iface;
}

ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    rc_iface *iface = to_rc(uct_iface);
    iface::query_common(&iface->super, attr);
    // No operation is advertised until the data path exists (issue 4):
    // UCP must never select a lane this interface cannot serve.
    attr->cap.flags      = 0;
    attr->iface_addr_len = 0;
    attr->ep_addr_len    = 0;
    attr->max_conn_priv  = 0;
    return UCS_OK;
}

ucs_status_t get_address(uct_iface_h, uct_iface_addr_t *)
{
    return UCS_OK;
}

int is_reachable(const uct_iface_h uct_iface, const uct_device_addr_t *dev_addr,
                 const uct_iface_addr_t *)
{
    return (dev_addr != nullptr) &&
           iface::is_device_reachable(&to_rc(uct_iface)->super, dev_addr);
}

ucs_status_t flush(uct_iface_h, unsigned, uct_completion_t *)
{
    return UCS_OK;
}

ucs_status_t fence(uct_iface_h, unsigned)
{
    return UCS_OK;
}

unsigned progress(uct_iface_h)
{
    return 0;
}

void progress_toggle(uct_iface_h, unsigned)
{
}

ucs_status_t ep_create(const uct_ep_params_t *, uct_ep_h *)
{
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t estimate_perf(uct_iface_h iface, uct_perf_attr_t *perf_attr)
{
    return uct_base_iface_estimate_perf(iface, perf_attr);
}

void vfs_refresh(uct_iface_h)
{
}

ucs_status_t ep_query(uct_ep_h, uct_ep_attr_t *)
{
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t ep_invalidate(uct_ep_h, unsigned)
{
    return UCS_ERR_UNSUPPORTED;
}

uct_iface_ops_t make_ops()
{
    uct_iface_ops_t ops;
    std::memset(&ops, 0, sizeof(ops));
    ops.ep_create                = ep_create;
    ops.iface_flush              = flush;
    ops.iface_fence              = fence;
    ops.iface_progress_enable    = progress_toggle;
    ops.iface_progress_disable   = progress_toggle;
    ops.iface_progress           = progress;
    ops.iface_close              = iface_close;
    ops.iface_query              = iface_query;
    ops.iface_get_device_address = iface::get_device_address;
    ops.iface_get_address        = get_address;
    ops.iface_is_reachable       = is_reachable;
    return ops;
}

uct_iface_ops_t          rc_ops          = make_ops();
uct_iface_internal_ops_t rc_internal_ops = {
    /* iface_estimate_perf */ estimate_perf,
    /* iface_vfs_refresh   */ vfs_refresh,
    /* ep_query            */ ep_query,
    /* ep_invalidate       */ ep_invalidate,
};

} // namespace

ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                        const uct_iface_params_t *params,
                        const uct_iface_config_t *config,
                        const iface::iface_settings &settings, uct_iface_h *iface_p)
{
    auto *iface = new (std::nothrow) rc_iface{};
    if (iface == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = iface::init(&iface->super, &rc_ops, &rc_internal_ops,
                                      md, worker, params, config, settings);
    if (status != UCS_OK) {
        delete iface;
        return status;
    }

    ibv_context *ctx = iface->super.md->dev.ctx();
    const char *dev  = iface->super.md->dev.name().c_str();
    iface->send_cq   = ibv_create_cq(ctx, static_cast<int>(settings.tx_queue_len),
                                     nullptr, nullptr, 0);
    iface->recv_cq   = (iface->send_cq == nullptr) ? nullptr :
                       ibv_create_cq(ctx, static_cast<int>(settings.rx_queue_len),
                                     nullptr, nullptr, 0);
    if ((iface->send_cq == nullptr) || (iface->recv_cq == nullptr)) {
        ucs_error("%s: ibv_create_cq() failed: %m", dev);
        status = UCS_ERR_NO_RESOURCE;
        goto err;
    }

    {
        ibv_srq_init_attr srq_attr = {};
        srq_attr.attr.max_wr       = settings.rx_queue_len;
        srq_attr.attr.max_sge      = 1;
        iface->srq = ibv_create_srq(iface->super.md->dev.pd(), &srq_attr);
        if (iface->srq == nullptr) {
            ucs_error("%s: ibv_create_srq(max_wr=%u) failed: %m", dev,
                      settings.rx_queue_len);
            status = UCS_ERR_NO_RESOURCE;
            goto err;
        }
    }

    *iface_p = &iface->super.super.super;
    return UCS_OK;

err:
    destroy(iface);
    iface::cleanup(&iface->super);
    delete iface;
    return status;
}

} // namespace zv::rc
