// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint: one RC QP towards a peer interface (shared with the
// peer's endpoint towards this one, see iface/conn.h).
#ifndef ZV_RC_RC_EP_H
#define ZV_RC_RC_EP_H

#include "iface/pending.h"
#include "rc/rc_iface.h"

namespace zv::rc {

/// Peer interface address: the number of its connection UD QP.
struct __attribute__((packed)) iface_addr {
    uint8_t ud_qpn[3];
};

struct rc_ep {
    enum class state : uint8_t { connecting, connected, failed };

    uct_base_ep_t       super;
    rc_iface           *iface;
    ibv_qp             *qp           = nullptr;
    uint32_t            slot         = 0;
    state               st           = state::connecting;
    bool                destroyed    = false; ///< waiting for flushed WRs
    bool                fence_next   = false;
    bool                on_pending_list = false;
    uint32_t            posted_seq   = 0;   ///< sequence of the last WR posted
    uint32_t            completed_seq = 0;  ///< all WRs up to here completed
    uint32_t            signaled_seq = 0;   ///< last WR posted signaled
    unsigned            max_send_wr  = 0;
    uint64_t            conn_id      = 0;
    iface::device_addr  peer;
    uint32_t            peer_ud_qpn  = 0;
    tx_op              *ops_head     = nullptr;
    tx_op              *ops_tail     = nullptr;
    iface::pending_queue pending;
    rc_ep              *pending_next = nullptr;
    ucs_status_t        error        = UCS_OK;
    /// The endpoint's work request, built once (next = null, zeroed); each
    /// operation sets only the fields it uses. One thread uses an endpoint
    /// at a time, and verbs copies the WR when it is posted.
    ibv_send_wr         wr           = {};
};

/// Send WRs in flight on the endpoint.
inline unsigned ep_outstanding(const rc_ep *ep) { return ep->posted_seq - ep->completed_seq; }

[[nodiscard]] ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
void ep_destroy(uct_ep_h ep);
/// Fill the endpoint part of the ops table.
void fill_ep_ops(uct_iface_ops_t *ops, bool atomics);
/// The data operations' part of it (rc_ep_ops.cc).
void fill_ep_data_ops(uct_iface_ops_t *ops, bool atomics);

/// Connection callbacks used by the interface's connection manager.
ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer,
                            uint32_t peer_qpn, ibv_qp **qp_p);
ucs_status_t connect_ep_qp(void *arg, ibv_qp *qp, const verbs::remote_port &peer,
                           uint32_t peer_qpn);
void connection_established(void *arg, uint64_t conn_id, uint32_t peer_qpn);
void connection_failed(void *arg, uint64_t conn_id, ucs_status_t status, const char *why);
/// Probe an unused QP (conn_callbacks::probe).
ucs_status_t probe_qp(void *arg, ibv_qp *qp);

/// Mark the endpoint failed: complete its work with 'status' and report
/// to UCT's error handling (once); 'why' says what happened, for the log.
void ep_fail(rc_ep *ep, ucs_status_t status, const char *why);

/// The device's asynchronous events, as rc_zv acts on them.
void handle_event(iface::zv_iface *base, const verbs::async_event &ev);

} // namespace zv::rc

#endif
