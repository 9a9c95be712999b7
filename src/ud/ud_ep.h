// SPDX-License-Identifier: BSD-3-Clause
// ud_zv endpoint: the sending side of a connection to a peer interface.
#ifndef ZV_UD_UD_EP_H
#define ZV_UD_UD_EP_H

#include "iface/pending.h"
#include "ud/ud_iface.h"

namespace zv::ud {

struct ud_ep {
    enum class state : uint8_t { connecting, connected, failed };

    uct_base_ep_t       super;
    ud_iface           *iface;
    uint32_t            id          = 0;
    uint32_t            peer_conn   = 0;  ///< the peer's rx_conn id (after CREP)
    uint32_t            peer_qpn    = 0;
    iface::device_addr  peer        = {};
    ibv_ah             *ah          = nullptr;
    state               st          = state::connecting;
    bool                destroyed   = false; ///< freed once unreleased == 0
    bool                on_busy     = false;
    bool                on_pending  = false;
    rel::sender         tx;
    rx_conn            *partner     = nullptr;
    unsigned            unreleased  = 0;     ///< descriptors not yet released
    tx_desc            *resend_next = nullptr; ///< go-back-N cursor
    ud_ep              *busy_next   = nullptr;
    ud_ep              *pending_next = nullptr;
    iface::pending_queue pending;
    std::vector<uct_completion_t *> flush_waiters;
    ucs_status_t        error       = UCS_OK;
    ibv_qp             *qp          = nullptr; ///< uc_zv: the connected queue pair
};

inline ud_ep *to_ep(uct_ep_h ep) { return reinterpret_cast<ud_ep *>(ep); }

[[nodiscard]] ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
void ep_destroy(uct_ep_h ep);
void fill_ep_ops(uct_iface_ops_t *ops);
/// uc_zv's put operations.
void fill_put_ops(uct_iface_ops_t *ops);
/// Allocate an endpoint for params (address parsed, sender ready); the
/// caller registers it (ep_register) once nothing else can fail.
[[nodiscard]] ucs_status_t ep_new(const uct_ep_params_t *params, ud_ep **ep_p);
/// Give the endpoint its id (table slot + generation).
void ep_register(ud_ep *ep);
/// Undo ep_new() for an endpoint that was never registered (create failed).
void ep_discard(ud_ep *ep);
/// Second half of destroying an endpoint: drop its work, unlink it, free
/// its id, and free it now or once its last send completes.
void ep_release(ud_ep *ep);

/// Continue a go-back-N retransmission (the send queue filled mid-way).
/// Returns packets posted.
unsigned resend_continue(ud_ep *ep);
/// Start a go-back-N retransmission from the oldest unacked packet.
void resend_all(ud_ep *ep);
/// Fail outstanding work and report once; 'why' says what happened.
void ep_fail(ud_ep *ep, ucs_status_t status, const char *why);
/// The device's asynchronous events, as ud_zv and uc_zv act on them.
void handle_event(iface::zv_iface *base, const verbs::async_event &ev);
/// Everything sent so far was released: complete flush waiters.
void ep_check_flushed(ud_ep *ep);
/// Try to send queued requests; false if the endpoint still has some.
bool ep_dispatch_pending(ud_ep *ep);
/// Add to the iface's timer list.
void busy_link(ud_ep *ep);

} // namespace zv::ud

#endif
