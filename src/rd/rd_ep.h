// SPDX-License-Identifier: BSD-3-Clause
// The sending side of a reliable-datagram connection, and the core's
// operations a transport's ops table is built from.
#ifndef ZV_RD_RD_EP_H
#define ZV_RD_RD_EP_H

#include "iface/pending.h"
#include "rd/rd_iface.h"

namespace zv::rd {

struct rd_ep {
    enum class state : uint8_t { connecting, connected, failed };

    uct_base_ep_t       super;
    rd_iface           *iface;
    uint32_t            id          = 0;
    uint32_t            peer_conn   = 0;  ///< the peer's rx_conn id, once connected
    uint32_t            peer_qpn    = 0;
    iface::device_addr  peer        = {};
    /// What it sends on, not its own: the interface's (ud_zv) or the
    /// connection manager's (uc_zv, until ep_freed() releases it).
    ibv_qp             *qp          = nullptr;
    /// Where its packets go: on a datagram QP, the peer's address handle
    /// (ud.ah, set by the transport), QP number and Q_Key (ep_new()); a
    /// connected QP's provider ignores it. Every descriptor starts with it.
    wr_target           target      = {};
    /// Its QP's send queue: the interface's (ud_zv) or own_sq (uc_zv).
    send_queue         *sq          = nullptr;
    send_queue          own_sq;
    state               st          = state::connecting;
    bool                destroyed   = false; ///< freed once unreleased == 0
    bool                on_busy     = false;
    bool                on_pending  = false;
    bool                ack_requested = false; ///< an ACK_REQ went out...
    rel::psn_t          ack_requested_psn = 0; ///< ...when this psn was next
    rel::sender         tx;
    rx_conn            *partner     = nullptr;
    unsigned            unreleased  = 0;     ///< descriptors not yet released
    /// Of those, the ones with a completion (zero-copy sends, which read
    /// the user's memory): ep_release() waits for them.
    unsigned            comps_unreleased = 0;
    /// Destroyed while a send queue still held some of those past the
    /// wait: their completions are not called (see ep_release).
    bool                comps_abandoned = false;
    bool                timed_out   = false; ///< check_timers() fails it

    tx_desc            *resend_next = nullptr; ///< go-back-N cursor
    rd_ep              *busy_next   = nullptr;
    rd_ep              *pending_next = nullptr;
    iface::pending_queue pending;
    std::vector<uct_completion_t *> flush_waiters;
    ucs_status_t        error       = UCS_OK;
};

inline rd_ep *to_ep(uct_ep_h ep) { return reinterpret_cast<rd_ep *>(ep); }

// ---------------------------------------------------------------- lifecycle

/// Allocate an endpoint for params (address parsed, sender ready); the
/// caller registers it (ep_register) once nothing else can fail.
[[nodiscard]] ucs_status_t ep_new(const uct_ep_params_t *params, rd_ep **ep_p);
/// Give the endpoint its id (table slot + generation; ep_new() made room).
void ep_register(rd_ep *ep);
/// Undo ep_new() for an endpoint that was never registered (create failed).
void ep_discard(rd_ep *ep);
/// Second half of destroying an endpoint: drop its work, unlink it, free
/// its id, and free it now or once its last send completes. Every
/// completion of its sends and flushes has been called when it returns
/// (UCS_ERR_CANCELED for what was not acknowledged), each only once no
/// work request can read the send's memory. May be called inside progress
/// (a callback) and from outside.
void ep_release(rd_ep *ep);
void ep_free(rd_ep *ep);
/// Fail outstanding work and report once; 'why' says what happened.
void ep_fail(rd_ep *ep, ucs_status_t status, const char *why);
/// The endpoint is connected (its peer_conn set): what it sent so far goes
/// out (post_held), and its pending requests are dispatched.
void ep_connected(rd_ep *ep);

// ---------------------------------------------------------------- protocol

/// Continue a go-back-N retransmission (the send queue filled mid-way).
/// Returns packets posted.
unsigned resend_continue(rd_ep *ep);
/// Start a go-back-N retransmission from the oldest unacked packet.
void resend_all(rd_ep *ep);
/// The endpoint just connected (its peer_conn set): what it sent while it
/// connected, held in its window, goes out now, addressed to peer_conn.
void post_held(rd_ep *ep);
/// Someone waits for the window to drain (a flush): ask the receiver to
/// acknowledge now, once per psn reached. Only an accelerator: if the
/// request is lost, the delayed ack or the timer still drains the window.
void request_ack(rd_ep *ep);
/// A control packet from ep to its receive connection at the peer: 'type',
/// then 'body' (DISC, ALIVE, ACK_REQ).
ucs_status_t send_to_conn(const rd_ep *ep, uint8_t type, const void *body, size_t body_len);
/// Complete the flush waiters (everything sent so far was released).
void ep_complete_flush(rd_ep *ep);
/// Everything sent so far was released: complete flush waiters, if any
/// (inline: released descriptors ask it at every ack).
inline void ep_check_flushed(rd_ep *ep)
{
    if (__builtin_expect((ep->unreleased == 0) && !ep->flush_waiters.empty(), 0)) {
        ep_complete_flush(ep);
    }
}
/// Try to send queued requests; false if the endpoint still has some.
bool ep_dispatch_pending(rd_ep *ep);
/// Queue the endpoint for dispatch_pending() if it has requests waiting.
void pending_link(rd_ep *ep);
/// Add to the iface's timer list.
void busy_link(rd_ep *ep);
/// A packet for the endpoint named by hdr (ack_dest for DATA, else dest)
/// from src_qp: checked, then ep_packet().
void handle_ep_packet(rd_iface *iface, const rd_hdr &hdr, uint32_t src_qp, uint32_t conn_id);
/// ACK, NAK, CREP, REBIND or a piggybacked ack for a known endpoint;
/// 'conn_id': CREP's and REBIND's receive connection at the peer, which
/// their transport read from the body (unused for the others).
void ep_packet(rd_ep *ep, const rd_hdr &hdr, uint32_t conn_id);
void dispatch_pending(rd_iface *iface);
unsigned check_timers(rd_iface *iface, ucs_time_t now);

// ---------------------------------------------------------------- ops

ucs_status_t ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header, const void *payload,
                         unsigned length);
ucs_status_t ep_am_short_iov(uct_ep_h ep, uint8_t id, const uct_iov_t *iov, size_t iovcnt);
ssize_t ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                    unsigned flags);
ucs_status_t ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                         unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                         unsigned flags, uct_completion_t *comp);
ucs_status_t ep_pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned flags);
void ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg);
ucs_status_t ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp);
ucs_status_t ep_fence(uct_ep_h ep, unsigned flags);
ucs_status_t ep_get_address(uct_ep_h ep, uct_ep_addr_t *addr);
/// UCT's ep_is_connected: the endpoint's peer is the interface of these
/// addresses (its device and its QP).
int ep_is_connected(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *iface_addr);

/// UCT's ep_check, which UCP's keepalive calls on every transport whatever
/// its flags say: the endpoint's failure if it failed, else UCS_OK. A peer
/// that dies while packets are outstanding fails the endpoint at TIMEOUT;
/// an idle endpoint learns it at its next send (no EP_CHECK advertised).
ucs_status_t ep_check(uct_ep_h ep, unsigned flags, uct_completion_t *comp);

/// The operations both transports share; each adds its endpoint lifecycle,
/// progress, close (and uc_zv its puts). Constant-evaluated: the tables
/// are built at compile time.
constexpr void fill_ops(uct_iface_ops_t &ops)
{
    ops.ep_am_short              = ep_am_short;
    ops.ep_am_short_iov          = ep_am_short_iov;
    ops.ep_am_bcopy              = ep_am_bcopy;
    ops.ep_am_zcopy              = ep_am_zcopy;
    ops.ep_pending_add           = ep_pending_add;
    ops.ep_pending_purge         = ep_pending_purge;
    ops.ep_flush                 = ep_flush;
    ops.ep_fence                 = ep_fence;
    ops.ep_check                 = ep_check;
    ops.ep_get_address           = ep_get_address;
    ops.iface_flush              = iface_flush;
    ops.iface_fence              = iface_fence;
    ops.iface_progress_disable   = iface::progress_disable;
    ops.iface_query              = iface_query;
    ops.iface_get_device_address = iface::get_device_address;
    ops.iface_get_address        = get_address;
    ops.iface_is_reachable       = iface::is_reachable;
}

} // namespace zv::rd

#endif
