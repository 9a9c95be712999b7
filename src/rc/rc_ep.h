// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint: one RC QP towards a peer interface (shared with the
// peer's endpoint towards this one, see iface/conn.h).
#ifndef ZV_RC_RC_EP_H
#define ZV_RC_RC_EP_H

#include "iface/pending.h"
#include "rc/rc_iface.h"

#include <vector>

namespace zv::rc {

/// Peer interface address: the number of its connection UD QP.
struct __attribute__((packed)) iface_addr {
    uint8_t ud_qpn[3];
};

/// A work request made while the endpoint connected, posted as it was
/// made (its wr_id, flags, sequence and op already taken) once the QP is
/// (post_held). Its inline data is a copy: the caller's memory is the
/// caller's again when the operation returns.
struct held_wr {
    ibv_send_wr          wr;
    std::vector<ibv_sge> sge;
    std::vector<char>    data;
};

struct rc_ep {
    enum class state : uint8_t { connecting, connected, failed };

    uct_base_ep_t       super;
    rc_iface           *iface;
    /// The connection manager's (from take() or claim()), used until
    /// release(): it outlives the endpoint, and the peer's may share it.
    ibv_qp             *qp           = nullptr;
    uint32_t            slot         = 0;
    uint64_t            wr_id_base   = 0;   ///< slot << 32: the WRs' ids (make_wr_id)
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
    /// What was posted while it connected (every WR it has then).
    std::vector<held_wr> held;
};

/// Send WRs in flight on the endpoint.
inline unsigned ep_outstanding(const rc_ep *ep) { return ep->posted_seq - ep->completed_seq; }

[[nodiscard]] ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
/// post() of a connecting endpoint: keep 'wr' (a copy) for post_held().
/// 0, or ENOMEM.
int hold(rc_ep *ep, const ibv_send_wr *wr);
/// Forget the held WRs (the endpoint failed or is destroyed connecting).
void drop_held(rc_ep *ep);
void ep_destroy(uct_ep_h ep);
ucs_status_t pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned flags);
void pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg);
ucs_status_t ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp);
ucs_status_t ep_fence(uct_ep_h ep, unsigned flags);
/// UCT's ep_is_connected: the endpoint's peer is the interface of these
/// addresses (its device and its UD connection QP).
int ep_is_connected(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *iface_addr);

// The data operations (rc_ep_ops.cc).
ucs_status_t am_short(uct_ep_h ep, uint8_t id, uint64_t header, const void *payload,
                      unsigned length);
ucs_status_t am_short_iov(uct_ep_h ep, uint8_t id, const uct_iov_t *iov, size_t iovcnt);
ssize_t am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                 unsigned flags);
ucs_status_t am_zcopy(uct_ep_h ep, uint8_t id, const void *header, unsigned header_length,
                      const uct_iov_t *iov, size_t iovcnt, unsigned flags,
                      uct_completion_t *comp);
ucs_status_t put_short(uct_ep_h ep, const void *buffer, unsigned length,
                       uint64_t remote_addr, uct_rkey_t rkey);
ssize_t put_bcopy(uct_ep_h ep, uct_pack_callback_t pack_cb, void *arg,
                  uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t get_bcopy(uct_ep_h ep, uct_unpack_callback_t unpack_cb, void *arg,
                       size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                       uct_completion_t *comp);
ucs_status_t atomic64_post(uct_ep_h ep, unsigned opcode, uint64_t value,
                           uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t atomic64_fetch(uct_ep_h ep, unsigned opcode, uint64_t value, uint64_t *result,
                            uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t atomic_cswap64(uct_ep_h ep, uint64_t compare, uint64_t swap,
                            uint64_t remote_addr, uct_rkey_t rkey, uint64_t *result,
                            uct_completion_t *comp);

/// UCT's ep_check, which UCP's keepalive calls on every transport whatever
/// its flags say (UCX 1.13's ucp_worker_do_keepalive_progress).
ucs_status_t ep_check(uct_ep_h ep, unsigned flags, uct_completion_t *comp);

/// The endpoint part of the ops table; constant-evaluated (rc_iface.cc).
constexpr void fill_ep_ops(uct_iface_ops_t &ops, bool atomics)
{
    ops.ep_am_short      = am_short;
    ops.ep_am_short_iov  = am_short_iov;
    ops.ep_am_bcopy      = am_bcopy;
    ops.ep_am_zcopy      = am_zcopy;
    ops.ep_put_short     = put_short;
    ops.ep_put_bcopy     = put_bcopy;
    ops.ep_put_zcopy     = put_zcopy;
    ops.ep_get_bcopy     = get_bcopy;
    ops.ep_get_zcopy     = get_zcopy;
    if (atomics) {
        ops.ep_atomic64_post  = atomic64_post;
        ops.ep_atomic64_fetch = atomic64_fetch;
        ops.ep_atomic_cswap64 = atomic_cswap64;
    }
    ops.ep_pending_add   = pending_add;
    ops.ep_pending_purge = pending_purge;
    ops.ep_flush         = ep_flush;
    ops.ep_fence         = ep_fence;
    ops.ep_check         = ep_check;
    ops.ep_create        = ep_create;
    ops.ep_destroy       = ep_destroy;
}

/// Connection callbacks used by the interface's connection manager.
ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer,
                            uint32_t peer_qpn, verbs::qp *qp_p);
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
