// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint hot path: resource checks and posting, shared by the
// operations (rc_ep_ops.cc) and flush (rc_ep.cc).
#ifndef ZV_RC_RC_EP_INL_H
#define ZV_RC_RC_EP_INL_H

#include "rc/rc_ep.h"
#include "rc/rc_wire.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <cstring>

namespace zv::rc {

/// An op's work on success beyond the plain case: get_bcopy's unpack, an
/// atomic fetch's result. Out of line: not hot.
void finish_op(const tx_op *op);

/// Run the op's completion work, release the op (with its bounce buffer,
/// where it lives) and call its completion with 'status'.
inline void retire_op(rc_iface *iface, tx_op *op, ucs_status_t status)
{
    if (__builtin_expect(op->type != tx_op::plain, 0) && (status == UCS_OK)) {
        finish_op(op);
    }
    uct_completion_t *comp = op->comp;
    if (op->bounce != nullptr) {
        iface::buffer_pool::put(op->bounce);
        iface->tx_starved = false;
    } else {
        op_put(iface, op);
    }
    if (comp != nullptr) {
        uct_invoke_completion(comp, status);
    }
}

inline rc_ep *to_ep(uct_ep_h ep) { return reinterpret_cast<rc_ep *>(ep); }

inline uint64_t make_wr_id(const rc_ep *ep, uint32_t seq)
{
    return ep->wr_id_base | seq;
}

// ---------------------------------------------------------------- resources

/// Can one more WR be posted now, with 'cq_limit' entries of the send CQ
/// for all? Resources only: the pending dispatch and the flush's signaled
/// WR ask this. (The caller has nothing to undo.)
inline ucs_status_t check_tx(const rc_ep *ep, unsigned cq_limit)
{
    if (__builtin_expect(ep->st == rc_ep::state::failed, 0)) {
        return ep->error;
    } // (a connecting endpoint may: its WRs wait for the QP, see post())
    rc_iface *iface = ep->iface;
    if (__builtin_expect(ep_outstanding(ep) >= ep->max_send_wr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (__builtin_expect(iface->tx_outstanding >= cq_limit, 0)) {
        cq_starve(iface);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/// The same for a send: the CQ's reserve is not for it, and it does not
/// overtake the endpoint's pending requests (UCT's order).
inline ucs_status_t check_tx(const rc_ep *ep)
{
    ucs_status_t status = check_tx(ep, ep->iface->tx_cq_limit);
    if (__builtin_expect((status == UCS_OK) && ep->pending.blocks(), 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return status;
}

inline void ops_push(rc_ep *ep, tx_op *op)
{
    op->next = nullptr;
    if (ep->ops_tail == nullptr) {
        ep->ops_head = op;
    } else {
        ep->ops_tail->next = op;
    }
    ep->ops_tail = op;
}


/// Post one WR; 'op' (may be null) retires when the WR completes.
/// 'need_signal': the caller needs a completion for this WR.
inline ucs_status_t post(rc_ep *ep, ibv_send_wr *wr, tx_op *op, bool need_signal)
{
    rc_iface *iface = ep->iface;
    uint32_t seq    = ep->posted_seq + 1;
    // Signal when asked, every tx_moderation WRs, or when the queue would
    // otherwise fill up with nothing to report its progress.
    bool signal = need_signal ||
                  (seq - ep->signaled_seq >= iface->settings.tx_moderation) ||
                  (ep_outstanding(ep) + 1 >= ep->max_send_wr);
    if (signal) {
        wr->send_flags |= IBV_SEND_SIGNALED;
    }
    if (ep->fence_next) {
        wr->send_flags |= IBV_SEND_FENCE;
    }
    wr->wr_id = make_wr_id(ep, seq);

    int ret;
    if (__builtin_expect(ep->st == rc_ep::state::connected, 1)) {
        ibv_send_wr *bad;
        ret = ibv_post_send(ep->qp, wr, &bad);
    } else {
        ret = hold(ep, wr); // connecting: posted once the QP is
    }
    if (__builtin_expect(ret != 0, 0)) {
        ucs_error("qp 0x%x: ibv_post_send() failed: %s", ep->qp->qp_num, strerror(ret));
        return verbs::status_from_errno(ret);
    }
    ep->fence_next = false;
    ep->posted_seq = seq;
    ++iface->tx_outstanding;
    if (signal) {
        ep->signaled_seq = seq;
    }
    if (op != nullptr) {
        op->seq = seq;
        ops_push(ep, op);
    }
    return UCS_OK;
}

/// Send resources for a bounced operation: a WR slot, a bounce buffer and
/// the op in it that releases it when its WR completes; *data_p is the
/// buffer's payload.
inline ucs_status_t start_bounced(rc_ep *ep, iface::buffer **b_p, char **data_p,
                                  tx_op **op_p)
{
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    rc_iface *iface  = ep->iface;
    iface::buffer *b = iface->tx_pool.get();
    if (__builtin_expect(b == nullptr, 0)) {
        tx_starve(iface);
        return UCS_ERR_NO_RESOURCE;
    }
    char *data = iface->tx_pool.data(b);
    tx_op *op  = bounce_op(data);
    op->comp   = nullptr;
    op->bounce = b;
    op->type   = tx_op::plain;
    *b_p       = b;
    *data_p    = data;
    *op_p      = op;
    return UCS_OK;
}

/// The tail of the send queue is unsignaled: post a signaled zero-length
/// RDMA WRITE (touches no memory, completes after everything before it) so
/// that its completion reports the rest. Once: then the tail is signaled.
/// It may take the CQ's reserve: it gives back what it takes, and more.
inline ucs_status_t signal_tail(rc_ep *ep, tx_op *op)
{
    ucs_status_t status = check_tx(ep, ep->iface->settings.tx_cq_len);
    if (status != UCS_OK) {
        return status;
    }
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_RDMA_WRITE;
    wr.send_flags  = 0;
    wr.num_sge     = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey        = 0;
    return post(ep, &wr, op, true);
}

/// A connected endpoint whose tail is unsignaled gets a signaled WR behind
/// it, whose completion reports the rest: for a polled flush (the caller
/// polls until UCS_OK) and when the send buffers ran out (tx_starve).
/// UCS_OK when none was needed or it was posted; UCS_ERR_NO_RESOURCE when
/// the queue is full.
inline ucs_status_t signal_unsignaled_tail(rc_ep *ep)
{
    if ((ep->st != rc_ep::state::connected) || (ep->signaled_seq == ep->posted_seq)) {
        return UCS_OK;
    }
    return signal_tail(ep, nullptr);
}

/// Post 'wr' (opcode and remote fields set by the caller) over 'length'
/// bytes of the bounce buffer 'b', whose data() is 'data' (the caller has
/// it: after a pack callback, recomputing it would load b->pool again); on
/// failure the op is retired.
inline ssize_t post_bounced(rc_ep *ep, ibv_send_wr *wr, iface::buffer *b, const char *data,
                            tx_op *op, size_t length, bool signal)
{
    ibv_sge sge = {reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(length),
                   b->lkey};
    wr->sg_list = &sge;
    wr->num_sge = 1;
    ucs_status_t status = post(ep, wr, op, signal);
    if (__builtin_expect(status != UCS_OK, 0)) {
        op->comp = nullptr;
        op->type = tx_op::plain;
        retire_op(ep->iface, op, status);
        return status;
    }
    return static_cast<ssize_t>(length);
}

inline void fill_sge_iov(ibv_sge *sge, const uct_iov_t *iov, size_t iovcnt,
                         size_t *total)
{
    for (size_t i = 0; i < iovcnt; ++i) {
        sge[i].addr   = reinterpret_cast<uintptr_t>(iov[i].buffer);
        sge[i].length = static_cast<uint32_t>(iov[i].length * (iov[i].count ? iov[i].count : 1));
        sge[i].lkey   = (iov[i].memh != UCT_MEM_HANDLE_NULL) ?
                        md::memh_lkey(iov[i].memh) : 0;
        *total += sge[i].length;
    }
}
/// A send completion of no endpoint's: a probe's, or a stale one (out of
/// line: rare).
void foreign_completion(rc_iface *iface, const ibv_wc &wc);
/// A send completion with an error: fail the endpoint (once); the status
/// its ops complete with (out of line: rare).
ucs_status_t completion_error(rc_ep *ep, const ibv_wc &wc);

/// One send completion: every WR of its endpoint up to the one it reports
/// is done (RC completes in order, unsignaled WRs too), and so are the ops
/// that wait for them.
inline void process_send_completion(rc_iface *iface, const ibv_wc &wc)
{
    uint32_t slot = static_cast<uint32_t>(wc.wr_id >> 32);
    uint32_t seq  = static_cast<uint32_t>(wc.wr_id);
    rc_ep *ep     = (slot < iface->slots.size()) ? iface->slots[slot] : nullptr;
    if (__builtin_expect(ep == nullptr, 0)) {
        foreign_completion(iface, wc);
        return;
    }
    uint32_t done = seq - ep->completed_seq;
    if (done <= ep_outstanding(ep)) {
        iface->tx_outstanding -= done;
        ep->completed_seq      = seq;
        // Entries came back: cq_starve() may signal more tails next time.
        iface->cq_starved = false;
    }
    ucs_status_t status = UCS_OK;
    if (__builtin_expect(wc.status != IBV_WC_SUCCESS, 0)) {
        status = completion_error(ep, wc);
    }
    while ((ep->ops_head != nullptr) &&
           (static_cast<int32_t>(ep->ops_head->seq - ep->completed_seq) <= 0)) {
        tx_op *op    = ep->ops_head;
        ep->ops_head = op->next;
        if (ep->ops_head == nullptr) {
            ep->ops_tail = nullptr;
        }
        retire_op(iface, op, status);
    }
    if (__builtin_expect(ep->destroyed, 0) && (ep_outstanding(ep) == 0)) {
        ++iface->deferred_frees; // freed when progress returns (progress_guard)
    }
}
} // namespace zv::rc

#endif
