// SPDX-License-Identifier: BSD-3-Clause
// ud_zv and uc_zv: what the device's asynchronous events do to endpoints.
#include "ud/ud_ep.h"

#include <vector>

namespace zv::ud {

namespace {

/// Fail every endpoint still working. By id: an error callback may
/// destroy endpoints (their memory stays until progress returns).
void fail_all(ud_iface *iface, const char *why)
{
    std::vector<uint32_t> ids;
    for (ud_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->st != ud_ep::state::failed)) {
            ids.push_back(ep->id);
        }
    }
    for (uint32_t id : ids) {
        ud_ep *ep = iface->eps.find(id);
        if (ep != nullptr) {
            ep_fail(ep, UCS_ERR_IO_ERROR, why);
        }
    }
}

} // namespace

void handle_event(iface::zv_iface *base, const verbs::async_event &ev)
{
    ud_iface *iface = reinterpret_cast<ud_iface *>(base);
    bool outer      = !iface->in_progress;
    iface->in_progress = true;
    switch (ev.what) {
    case verbs::async_event::kind::qp_fatal:
        if ((iface->qp != nullptr) && (iface->qp->qp_num == ev.qp_num)) {
            fail_all(iface, "the interface's qp failed");
        } else if (iface->uc) {
            auto it = iface->ep_by_qp.find(ev.qp_num);
            if ((it != iface->ep_by_qp.end()) && (it->second->st != ud_ep::state::failed)) {
                ep_fail(it->second, UCS_ERR_IO_ERROR, "its qp failed");
            }
        }
        break;
    case verbs::async_event::kind::device_fatal:
        iface->super.device_lost = true;
        fail_all(iface, "the device is lost");
        break;
    default:
        break; // port events: endpoints fail by the peer timeout, if at all
    }
    if (outer) {
        iface->in_progress = false;
        if (!iface->graveyard.empty()) {
            free_deferred(iface);
        }
    }
}

} // namespace zv::ud
