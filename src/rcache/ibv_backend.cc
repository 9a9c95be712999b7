// SPDX-License-Identifier: BSD-3-Clause
// The real registration backend: ibv_reg_mr on one protection domain (see ibv_backend.h).
#include "rcache/ibv_backend.h"

#include "util/log.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>

namespace zv::rcache {

ucs_status_t ibv_backend::create(struct ibv_pd *pd, bool use_odp, unsigned transports,
                                 ibv_backend **out)
{
    auto *be = new (std::nothrow) ibv_backend(pd);
    if (be == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }

    struct ibv_device_attr_ex attr = {};
    const int rc = ibv_query_device_ex(pd->context, nullptr, &attr);
    if (rc != 0) {
        // Not fatal: no ODP, max_mr unknown.
        zv_log_debug("ibv_query_device_ex(%s) failed: %s", ibv_get_device_name(pd->context->device),
                     strerror(rc));
    } else {
        be->m_max_mr = static_cast<uint64_t>(attr.orig_attr.max_mr);
        if (use_odp) {
            odp_caps caps;
            caps.general_caps    = attr.odp_caps.general_caps;
            caps.rc_caps         = attr.odp_caps.per_transport_caps.rc_odp_caps;
            caps.uc_caps         = attr.odp_caps.per_transport_caps.uc_odp_caps;
            caps.ud_caps         = attr.odp_caps.per_transport_caps.ud_odp_caps;
            be->m_odp_access     = odp_access_mask(caps, transports);
            be->m_odp_implicit   = decide_odp(caps, be->m_odp_access, transports).implicit;
        }
    }
    *out = be;
    return UCS_OK;
}

ucs_status_t ibv_backend::reg(void *addr, size_t len, unsigned access, bool odp,
                              reg_handle *out)
{
    const int      flags = static_cast<int>(access | (odp ? IBV_ACCESS_ON_DEMAND : 0));
    struct ibv_mr *mr    = ibv_reg_mr(m_pd, addr, len, flags);
    if (mr == nullptr) {
        // The cache retries narrower ranges and decides what to report.
        zv_log_debug("ibv_reg_mr(%p, %zu, access 0x%x) failed: %m", addr, len, flags);
        return (errno == ENOMEM) ? UCS_ERR_NO_MEMORY : UCS_ERR_IO_ERROR;
    }
    out->obj  = mr;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    return UCS_OK;
}

void ibv_backend::dereg(const reg_handle &handle)
{
    const int rc = ibv_dereg_mr(mr(handle));
    if (rc != 0) {
        zv_log_warn("ibv_dereg_mr(%p) failed: %s", handle.obj, strerror(rc));
    }
}

} // namespace zv::rcache
