// SPDX-License-Identifier: BSD-3-Clause
// ud_zv and uc_zv: what the device's asynchronous events and failed work
// requests do to queue pairs and endpoints.
#include "ud/ud_ep.h"

#include <cstdio>
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

/// A work request failed. ud_zv: if the interface's QP is in the error
/// state, stop posting until recover_qp(). uc_zv: the endpoint whose QP it
/// is fails (a UC QP is not reset under a live peer connection).
void note_qp_error(ud_iface *iface, const ibv_wc &wc)
{
    if (iface->uc) {
        auto it = iface->ep_by_qp.find(wc.qp_num);
        if ((it != iface->ep_by_qp.end()) && (it->second->st != ud_ep::state::failed)) {
            char why[96];
            snprintf(why, sizeof(why), "send completion with error: %s",
                     ibv_wc_status_str(wc.status));
            ep_fail(it->second, UCS_ERR_IO_ERROR, why);
        }
        return;
    }
    if (!iface->qp_broken && verbs::qp_in_error(iface->qp)) {
        iface->qp_broken = true;
        iface->tx_limit  = 0; // nothing more is posted to it until it is reset
        ucs_diag("%s: ud_zv qp 0x%x entered the error state (%s): reset once its work "
                 "has flushed", iface->super.md->dev.name().c_str(), iface->qp->qp_num,
                 ibv_wc_status_str(wc.status));
    }
}

/// Every work request of the broken QP has flushed: reset it, keeping its
/// number, and post the receive buffers again.
void recover_qp(ud_iface *iface)
{
    if ((iface->tx_outstanding > 0) || (iface->rx_posted > 0) ||
        (verbs::reset_ud_qp(iface->qp, *iface->super.port, qkey) != UCS_OK)) {
        return; // next progress
    }
    iface->qp_broken = false;
    iface->tx_limit  = iface->super.settings.tx_queue_len;
    ++iface->qp_resets;
    post_rx(iface, iface->super.settings.rx_queue_len);
    ucs_diag("%s: ud_zv qp 0x%x reset: %u receive buffers posted, unacknowledged "
             "packets are resent", iface->super.md->dev.name().c_str(), iface->qp->qp_num,
             iface->rx_posted);
}

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
