// SPDX-License-Identifier: BSD-3-Clause
// ud_zv endpoint: address handles, connection (CREQ), disconnection (DISC).
#include "ud/ud_iface.h"

#include "rd/rd_send.h"
#include "util/nothrow.h"

#include <cstring>
#include <utility>
#include <vector>

namespace zv::ud {

ucs_status_t ah_for(ud_iface *iface, const iface::device_addr &peer, ibv_ah **ah_p)
{
    const iface::port_key_t key = iface::port_key(peer);
    auto it                     = iface->ahs.find(key);
    if (it != iface->ahs.end()) {
        *ah_p = it->second.get();
        return UCS_OK;
    }
    const iface::zv_iface &base = iface->super.super;
    verbs::ah ah;
    ucs_status_t status = verbs::create_ah(base.md->dev, *base.port, iface::to_remote(peer),
                                           &ah);
    if (status != UCS_OK) {
        return status;
    }
    ibv_ah *const made = ah.get();
    status = util::try_alloc([&] { iface->ahs.emplace(key, std::move(ah)); });
    if (status != UCS_OK) {
        return status; // (the handle is destroyed with 'ah')
    }
    *ah_p = made;
    return UCS_OK;
}

ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    worker_scope scope(&to_rd(params->iface)->as.gate);
    rd_ep *ep;
    ucs_status_t status = ep_new(params, &ep);
    if (status != UCS_OK) {
        return status;
    }
    ud_iface *iface = to_ud(ep->iface);
    ep->qp          = iface->qp.get();
    status          = ah_for(iface, ep->peer, &ep->target.ud.ah);
    if (status != UCS_OK) {
        ep_discard(ep);
        return status;
    }
    tx_desc *d = desc_get(ep, rd_hdr::creq, sizeof(creq_body));
    if (d == nullptr) {
        ep_discard(ep);
        return UCS_ERR_NO_MEMORY;
    }
    ep_register(ep);

    find_partner(ep);

    // The CREQ is psn 0 of the connection: retried by the window's timer.
    creq_body b;
    b.ep_id = ep->id;
    char da[sizeof(iface::device_addr)];
    (void)iface::get_device_address(params->iface, reinterpret_cast<uct_device_addr_t *>(da));
    std::memcpy(&b.dev, da, sizeof(b.dev));
    d->hdr()->dest = 0;
    std::memcpy(d->payload(), &b, sizeof(b));
    send_desc(ep, d, sizeof(b));
    *ep_p = &ep->super.super;
    return UCS_OK;
}

void ep_destroy(uct_ep_h uct_ep)
{
    rd_ep *ep = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    if (ep->st == rd_ep::state::connected) {
        // Best effort: a lost DISC leaves the peer's receive connection
        // until its probes go unanswered (ud_reclaim.cc).
        disc_body b{ep->id};
        (void)send_to_conn(ep, rd_hdr::disc, &b, sizeof(b));
    }
    ep_release(ep);
}

} // namespace zv::ud
