// SPDX-License-Identifier: BSD-3-Clause
// An endpoint's queue of UCT pending requests (linked through req->priv).
#ifndef ZV_IFACE_PENDING_H
#define ZV_IFACE_PENDING_H

#include <uct/api/uct.h>

namespace zv::iface {

/// FIFO of uct_pending_req_t; no allocation (the link lives in req->priv).
/// Not thread safe (one endpoint, one thread at a time, as UCT requires).
class pending_queue {
public:
    bool empty() const { return m_head == nullptr; }
    /// Requests wait that a new send must not overtake (UCT's order: a
    /// send answers NO_RESOURCE while its endpoint has pending requests).
    /// Not while one of them runs: its sends are the queue's head's.
    bool blocks() const { return (m_head != nullptr) && !m_running; }

    void push(uct_pending_req_t *req)
    {
        next(req) = nullptr;
        if (m_tail == nullptr) {
            m_head = req;
        } else {
            next(m_tail) = req;
        }
        m_tail = req;
    }

    /// Remove every request, calling cb (if any) on each, in order.
    void purge(uct_pending_purge_callback_t cb, void *arg)
    {
        uct_pending_req_t *req = m_head;
        m_head = m_tail = nullptr;
        while (req != nullptr) {
            uct_pending_req_t *n = next(req);
            if (cb != nullptr) {
                cb(req, arg);
            }
            req = n;
        }
    }

    /// Run queued requests while can_send() says there are resources, at
    /// most 'budget' calls. A request leaves the queue while its callback
    /// runs (a purge from inside the callback reports only the others):
    /// UCS_OK means done; UCS_INPROGRESS made progress, back to the head
    /// and runs again; anything else means "out of resources again", back
    /// to the head, and stops. Returns true when empty.
    template <class CanSend>
    bool dispatch(CanSend &&can_send, unsigned budget = 64)
    {
        while ((m_head != nullptr) && (budget-- > 0) && can_send()) {
            uct_pending_req_t *req = m_head;
            m_head                 = next(req);
            if (m_head == nullptr) {
                m_tail = nullptr;
            }
            const bool running  = m_running;
            m_running           = true;
            ucs_status_t status = req->func(req);
            m_running           = running;
            if (status == UCS_OK) {
                continue;
            }
            push_front(req);
            if (status != UCS_INPROGRESS) {
                break;
            }
        }
        return m_head == nullptr;
    }

private:
    void push_front(uct_pending_req_t *req)
    {
        next(req) = m_head;
        m_head    = req;
        if (m_tail == nullptr) {
            m_tail = req;
        }
    }

    static uct_pending_req_t *&next(uct_pending_req_t *req)
    {
        return *reinterpret_cast<uct_pending_req_t **>(req->priv);
    }

    uct_pending_req_t *m_head = nullptr;
    uct_pending_req_t *m_tail = nullptr;
    bool               m_running = false; ///< a request's callback runs
};

/// UCT's ep_pending_add, the same for every zv endpoint type Ep (it has
/// 'pending', 'st', 'iface->tx_starved'); can_send: a send would find what
/// it needs now; link queues the endpoint for the interface's dispatch.
template <class Ep>
ucs_status_t pending_add(Ep *ep, uct_pending_req_t *req, bool can_send, void (*link)(Ep *))
{
    // BUSY tells UCP to retry at once, without progress: only when the send
    // would find what it needs (a starved send would loop forever).
    if (ep->pending.empty() && can_send && !ep->iface->tx_starved) {
        return UCS_ERR_BUSY; // resources are available: send it now
    }
    ep->pending.push(req);
    if (ep->st == Ep::state::connected) {
        link(ep);
    }
    return UCS_OK;
}

} // namespace zv::iface

#endif
