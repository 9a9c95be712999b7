// SPDX-License-Identifier: BSD-3-Clause
// What the device's asynchronous events do to the endpoints of a
// reliable-datagram interface (the transport decides for its own QPs).
#include "rd/rd_ep.h"

#include <vector>

namespace zv::rd {

/// By id: an error callback may destroy endpoints (their memory stays
/// until progress returns).
void fail_all(rd_iface *iface, const char *why)
{
    std::vector<uint32_t> ids;
    for (rd_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->st != rd_ep::state::failed)) {
            ids.push_back(ep->id);
        }
    }
    for (uint32_t id : ids) {
        rd_ep *ep = iface->eps.find(id);
        if (ep != nullptr) {
            ep_fail(ep, UCS_ERR_IO_ERROR, why);
        }
    }
}

void handle_event(iface::zv_iface *base, const verbs::async_event &ev)
{
    rd_iface *iface    = reinterpret_cast<rd_iface *>(base);
    worker_scope scope(&iface->as.gate);
    bool outer         = !iface->in_progress;
    iface->in_progress = true;
    switch (ev.what) {
    case verbs::async_event::kind::qp_fatal:
        iface->tl->qp_fatal(iface, ev.qp_num);
        break;
    case verbs::async_event::kind::device_fatal:
        iface->super.device_lost = true;
        fail_all(iface, "the device is lost");
        break;
    default:
        break; // port events: endpoints fail by the peer timeout, if at all
    }
    if (outer) {
        progress_end(iface);
    }
}

} // namespace zv::rd
