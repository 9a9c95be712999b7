// SPDX-License-Identifier: BSD-3-Clause
// What the device's asynchronous events do to the endpoints of a
// reliable-datagram interface (the transport decides for its own QPs).
#include "rd/rd_ep.h"

#include <ucs/time/time.h>


namespace zv::rd {

/// By index, with the table read again each time: an error callback may
/// destroy endpoints (a destroyed one leaves the table; its memory stays
/// until progress returns) or create them. Allocates nothing.
void fail_all(rd_iface *iface, const char *why)
{
    for (size_t i = 0; i < iface->eps.slots().size(); ++i) {
        rd_ep *ep = iface->eps.slots()[i];
        if ((ep != nullptr) && (ep->st != rd_ep::state::failed)) {
            ep_fail(ep, UCS_ERR_IO_ERROR, why);
        }
    }
}

void handle_event(iface::zv_iface *base, const verbs::async_event &ev)
{
    rd_iface *iface    = reinterpret_cast<rd_iface *>(base);
    worker_scope scope(&iface->as.gate);
    ++iface->in_progress; // (progress_end() takes it back, and frees when outermost)
    switch (ev.what) {
    case verbs::async_event::kind::qp_fatal:
        iface->tl->qp_fatal(iface, ev.qp_num);
        break;
    case verbs::async_event::kind::device_fatal:
        iface->super.device_lost = true;
        fail_all(iface, "the device is lost");
        break;
    case verbs::async_event::kind::port_down:
        if ((ev.port_num == iface->super.port->port_num) && !iface->port_down) {
            iface->port_down    = true;
            iface->port_down_at = ucs_get_time();
            tx_limit_update(iface);
            // On the timer list, every one: what waits to be sent (pending
            // requests) fails too if the port does not come back.
            for (rd_ep *ep : iface->eps.slots()) {
                if ((ep != nullptr) && (ep->st != rd_ep::state::failed)) {
                    busy_link(ep);
                }
            }
        }
        break;
    case verbs::async_event::kind::port_up:
        if ((ev.port_num == iface->super.port->port_num) && iface->port_down) {
            iface->port_down = false;
            tx_limit_update(iface);
            const ucs_time_t now = ucs_get_time();
            for (rd_ep *ep = iface->busy_eps; ep != nullptr; ep = ep->busy_next) {
                ep->tx.restart(now);
            }
            iface->next_timer = now; // (the next timer check resends)
        }
        break;
    default:
        break;
    }
    progress_end(iface);
}

} // namespace zv::rd
