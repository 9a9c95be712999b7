// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint: connection, send operations, completions, pending, flush.
#include "rc/rc_ep.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <cstring>
#include <new>

namespace zv::rc {

namespace {

constexpr int remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC;

inline rc_ep *to_ep(uct_ep_h ep) { return reinterpret_cast<rc_ep *>(ep); }

inline uint64_t make_wr_id(const rc_ep *ep, uint32_t seq)
{
    return (static_cast<uint64_t>(ep->slot) << 32) | seq;
}

inline uint32_t am_imm(uint8_t am_id) { return htonl(am_id); }

// ---------------------------------------------------------------- resources

/// Can one more WR be posted now? (The caller has nothing to undo.)
inline ucs_status_t check_tx(const rc_ep *ep)
{
    if (__builtin_expect(ep->st != rc_ep::state::connected, 0)) {
        return (ep->st == rc_ep::state::failed) ? ep->error : UCS_ERR_NO_RESOURCE;
    }
    const rc_iface *iface = ep->iface;
    if (__builtin_expect((ep_outstanding(ep) >= ep->max_send_wr) ||
                         (iface->tx_outstanding >= iface->settings.tx_cq_len), 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
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

void retire_op(rc_iface *iface, tx_op *op, ucs_status_t status)
{
    if (status == UCS_OK) {
        switch (op->type) {
        case tx_op::get_bcopy:
            op->unpack(op->arg, op->bounce->data(), op->length);
            break;
        case tx_op::atomic_fetch:
            std::memcpy(op->result, op->bounce->data(), sizeof(uint64_t));
            break;
        default:
            break;
        }
    }
    if (op->bounce != nullptr) {
        iface::buffer_pool::put(op->bounce);
    }
    if (op->comp != nullptr) {
        uct_invoke_completion(op->comp, status);
    }
    op_put(iface, op);
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

    ibv_send_wr *bad;
    int ret = ibv_post_send(ep->qp, wr, &bad);
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

/// A bounce buffer and the op that releases it when its WR completes.
inline ucs_status_t get_bounce(rc_iface *iface, iface::buffer **b_p, tx_op **op_p)
{
    iface::buffer *b = iface->tx_pool.get();
    tx_op *op        = (b != nullptr) ? op_get(iface) : nullptr;
    if (__builtin_expect(op == nullptr, 0)) {
        if (b != nullptr) {
            iface::buffer_pool::put(b);
        }
        return UCS_ERR_NO_RESOURCE;
    }
    op->bounce = b;
    *b_p       = b;
    *op_p      = op;
    return UCS_OK;
}

/// Post 'wr' (opcode and remote fields set by the caller) over 'length'
/// bytes of the bounce buffer 'b'; on failure the op is retired.
inline ssize_t post_bounced(rc_ep *ep, ibv_send_wr *wr, iface::buffer *b, tx_op *op,
                            size_t length, bool signal)
{
    ibv_sge sge = {reinterpret_cast<uintptr_t>(b->data()),
                   static_cast<uint32_t>(length), b->lkey};
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

// ---------------------------------------------------------------- AM

ucs_status_t am_short(uct_ep_h uct_ep, uint8_t id, uint64_t header,
                      const void *payload, unsigned length)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(&header), sizeof(header), 0},
                      {reinterpret_cast<uintptr_t>(payload), length, 0}};
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = sge;
    wr.num_sge     = (length > 0) ? 2 : 1;
    return post(ep, &wr, nullptr, false);
}

ucs_status_t am_short_iov(uct_ep_h uct_ep, uint8_t id, const uct_iov_t *iov,
                          size_t iovcnt)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge[4];
    size_t total = 0;
    if (iovcnt > 4) {
        return UCS_ERR_INVALID_PARAM;
    }
    fill_sge_iov(sge, iov, iovcnt, &total);
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = sge;
    wr.num_sge     = static_cast<int>(iovcnt);
    return post(ep, &wr, nullptr, false);
}

ssize_t am_bcopy(uct_ep_h uct_ep, uint8_t id, uct_pack_callback_t pack_cb,
                 void *arg, unsigned flags)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    iface::buffer *b;
    tx_op *op;
    if (__builtin_expect(status != UCS_OK, 0) ||
        ((status = get_bounce(ep->iface, &b, &op)) != UCS_OK)) {
        return status;
    }
    size_t length   = pack_cb(b->data(), arg);
    ibv_send_wr &wr = ep->wr;
    wr.opcode       = IBV_WR_SEND_WITH_IMM;
    wr.imm_data     = am_imm(id);
    wr.send_flags   = (length <= ep->iface->max_inline) ? IBV_SEND_INLINE : 0;
    return post_bounced(ep, &wr, b, op, length, false);
}

ucs_status_t am_zcopy(uct_ep_h uct_ep, uint8_t id, const void *header,
                      unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                      unsigned flags, uct_completion_t *comp)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    if (iovcnt > 3) {
        return UCS_ERR_INVALID_PARAM;
    }
    tx_op *op = op_get(ep->iface);
    if (op == nullptr) {
        return UCS_ERR_NO_RESOURCE;
    }
    ibv_sge sge[4];
    int nsge = 0;
    if (header_length > 0) {
        iface::buffer *b = ep->iface->tx_pool.get();
        if (b == nullptr) {
            op_put(ep->iface, op);
            return UCS_ERR_NO_RESOURCE;
        }
        std::memcpy(b->data(), header, header_length);
        op->bounce = b;
        sge[nsge++] = {reinterpret_cast<uintptr_t>(b->data()), header_length, b->lkey};
    }
    size_t total = header_length;
    fill_sge_iov(&sge[nsge], iov, iovcnt, &total);
    nsge += static_cast<int>(iovcnt);
    op->comp       = comp;
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = 0;
    wr.sg_list     = sge;
    wr.num_sge     = nsge;
    status = post(ep, &wr, op, comp != nullptr);
    if (status != UCS_OK) {
        op->comp = nullptr;
        retire_op(ep->iface, op, status);
        return status;
    }
    return UCS_INPROGRESS;
}

// ---------------------------------------------------------------- RMA

ucs_status_t put_short(uct_ep_h uct_ep, const void *buffer, unsigned length,
                       uint64_t remote_addr, uct_rkey_t rkey)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge    = {reinterpret_cast<uintptr_t>(buffer), length, 0};
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_RDMA_WRITE;
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = &sge;
    wr.num_sge     = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    return post(ep, &wr, nullptr, false);
}

ssize_t put_bcopy(uct_ep_h uct_ep, uct_pack_callback_t pack_cb, void *arg,
                  uint64_t remote_addr, uct_rkey_t rkey)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    iface::buffer *b;
    tx_op *op;
    if (__builtin_expect(status != UCS_OK, 0) ||
        ((status = get_bounce(ep->iface, &b, &op)) != UCS_OK)) {
        return status;
    }
    size_t length          = pack_cb(b->data(), arg);
    ibv_send_wr &wr         = ep->wr;
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    return post_bounced(ep, &wr, b, op, length, false);
}

ucs_status_t rdma_zcopy(rc_ep *ep, ibv_wr_opcode opcode, const uct_iov_t *iov,
                        size_t iovcnt, uint64_t remote_addr, uct_rkey_t rkey,
                        uct_completion_t *comp)
{
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    if (iovcnt > 4) {
        return UCS_ERR_INVALID_PARAM;
    }
    tx_op *op = nullptr;
    if (comp != nullptr) {
        op = op_get(ep->iface);
        if (op == nullptr) {
            return UCS_ERR_NO_RESOURCE;
        }
        op->comp = comp;
    }
    ibv_sge sge[4];
    size_t total = 0;
    fill_sge_iov(sge, iov, iovcnt, &total);
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = opcode;
    wr.send_flags  = 0;
    wr.sg_list     = sge;
    wr.num_sge     = static_cast<int>(iovcnt);
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    status = post(ep, &wr, op, comp != nullptr);
    if (status != UCS_OK) {
        if (op != nullptr) {
            op->comp = nullptr;
            retire_op(ep->iface, op, status);
        }
        return status;
    }
    return UCS_INPROGRESS;
}

ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return rdma_zcopy(to_ep(ep), IBV_WR_RDMA_WRITE, iov, iovcnt, remote_addr, rkey,
                      comp);
}

ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return rdma_zcopy(to_ep(ep), IBV_WR_RDMA_READ, iov, iovcnt, remote_addr, rkey,
                      comp);
}

ucs_status_t get_bcopy(uct_ep_h uct_ep, uct_unpack_callback_t unpack_cb, void *arg,
                       size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                       uct_completion_t *comp)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep);
    iface::buffer *b;
    tx_op *op;
    if (length > ep->iface->tx_pool.payload()) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (__builtin_expect(status != UCS_OK, 0) ||
        ((status = get_bounce(ep->iface, &b, &op)) != UCS_OK)) {
        return status;
    }
    op->type               = tx_op::get_bcopy;
    op->unpack             = unpack_cb;
    op->arg                = arg;
    op->length             = static_cast<uint32_t>(length);
    op->comp               = comp;
    ibv_send_wr &wr         = ep->wr;
    wr.opcode              = IBV_WR_RDMA_READ;
    wr.send_flags          = 0;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    ssize_t ret            = post_bounced(ep, &wr, b, op, length, true);
    return (ret < 0) ? static_cast<ucs_status_t>(ret) : UCS_INPROGRESS;
}

// ---------------------------------------------------------------- atomics

ucs_status_t post_atomic(rc_ep *ep, ibv_wr_opcode opcode, uint64_t compare_add,
                         uint64_t swap, uint64_t remote_addr, uct_rkey_t rkey,
                         uint64_t *result, uct_completion_t *comp)
{
    ucs_status_t status = check_tx(ep);
    iface::buffer *b;
    tx_op *op;
    if (__builtin_expect(status != UCS_OK, 0) ||
        ((status = get_bounce(ep->iface, &b, &op)) != UCS_OK)) {
        return status;
    }
    if (result != nullptr) {
        op->type   = tx_op::atomic_fetch;
        op->result = result;
        op->comp   = comp;
    }
    ibv_send_wr &wr           = ep->wr;
    wr.opcode                = opcode;
    wr.send_flags            = 0;
    wr.wr.atomic.remote_addr = remote_addr;
    wr.wr.atomic.rkey        = static_cast<uint32_t>(rkey);
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap        = swap;
    ssize_t ret = post_bounced(ep, &wr, b, op, sizeof(uint64_t), result != nullptr);
    if (ret < 0) {
        return static_cast<ucs_status_t>(ret);
    }
    return (result != nullptr) ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t atomic64_post(uct_ep_h ep, unsigned opcode, uint64_t value,
                           uint64_t remote_addr, uct_rkey_t rkey)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0, remote_addr,
                       rkey, nullptr, nullptr);
}

ucs_status_t atomic64_fetch(uct_ep_h ep, unsigned opcode, uint64_t value,
                            uint64_t *result, uint64_t remote_addr, uct_rkey_t rkey,
                            uct_completion_t *comp)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0, remote_addr,
                       rkey, result, comp);
}

ucs_status_t atomic_cswap64(uct_ep_h ep, uint64_t compare, uint64_t swap,
                            uint64_t remote_addr, uct_rkey_t rkey, uint64_t *result,
                            uct_completion_t *comp)
{
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap,
                       remote_addr, rkey, result, comp);
}

// ---------------------------------------------------------------- pending

inline uct_pending_req_t *&pending_next(uct_pending_req_t *req)
{
    return *reinterpret_cast<uct_pending_req_t **>(req->priv);
}

void link_pending_ep(rc_ep *ep)
{
    if (!ep->on_pending_list) {
        ep->on_pending_list   = true;
        ep->pending_next      = ep->iface->pending_eps;
        ep->iface->pending_eps = ep;
    }
}

ucs_status_t pending_add(uct_ep_h uct_ep, uct_pending_req_t *req, unsigned)
{
    rc_ep *ep = to_ep(uct_ep);
    if ((ep->pending_head == nullptr) && (check_tx(ep) == UCS_OK)) {
        return UCS_ERR_BUSY; // resources are available: send it now
    }
    pending_next(req) = nullptr;
    if (ep->pending_tail == nullptr) {
        ep->pending_head = req;
    } else {
        pending_next(ep->pending_tail) = req;
    }
    ep->pending_tail = req;
    if (ep->st == rc_ep::state::connected) {
        link_pending_ep(ep);
    }
    return UCS_OK;
}

void pending_purge(uct_ep_h uct_ep, uct_pending_purge_callback_t cb, void *arg)
{
    rc_ep *ep              = to_ep(uct_ep);
    uct_pending_req_t *req = ep->pending_head;
    ep->pending_head = ep->pending_tail = nullptr;
    while (req != nullptr) {
        uct_pending_req_t *next = pending_next(req);
        if (cb != nullptr) {
            cb(req, arg);
        }
        req = next;
    }
}

/// Run the endpoint's queued requests while it has resources. Returns
/// true when its queue is empty.
bool dispatch_ep(rc_ep *ep)
{
    unsigned budget = 64;
    while ((ep->pending_head != nullptr) && (budget-- > 0) &&
           (check_tx(ep) == UCS_OK)) {
        uct_pending_req_t *req = ep->pending_head;
        ucs_status_t status    = req->func(req);
        if (status == UCS_OK) {
            ep->pending_head = pending_next(req);
            if (ep->pending_head == nullptr) {
                ep->pending_tail = nullptr;
            }
        } else if (status != UCS_INPROGRESS) {
            break; // out of resources again
        }
    }
    return ep->pending_head == nullptr;
}

// ---------------------------------------------------------------- flush/fence

ucs_status_t ep_flush(uct_ep_h uct_ep, unsigned flags, uct_completion_t *comp)
{
    rc_ep *ep = to_ep(uct_ep);
    if (ep->st == rc_ep::state::failed) {
        return ep->error;
    }
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        pending_purge(uct_ep, nullptr, nullptr);
    }
    if ((ep->st == rc_ep::state::connected) && (ep_outstanding(ep) == 0)) {
        return UCS_OK;
    }
    if ((ep->st == rc_ep::state::connecting) || (ep->pending_head != nullptr)) {
        return UCS_ERR_NO_RESOURCE; // UCT: retry flush after pending drains
    }
    if (comp == nullptr) {
        return UCS_INPROGRESS;
    }
    tx_op *op = op_get(ep->iface);
    if (op == nullptr) {
        return UCS_ERR_NO_RESOURCE;
    }
    op->comp = comp;
    if (ep->signaled_seq == ep->posted_seq) {
        // The last WR will report its completion: wait behind it.
        op->type = tx_op::flush_waiter;
        op->seq  = ep->posted_seq;
        ops_push(ep, op);
        return UCS_INPROGRESS;
    }
    // The tail is unsignaled: post a signaled zero-length RDMA WRITE, which
    // touches no memory and completes after everything before it.
    ucs_status_t status = check_tx(ep);
    if (status != UCS_OK) {
        op->comp = nullptr;
        op_put(ep->iface, op);
        return status;
    }
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_RDMA_WRITE;
    wr.send_flags  = 0;
    wr.num_sge     = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey        = 0;
    status = post(ep, &wr, op, true);
    if (status != UCS_OK) {
        op->comp = nullptr;
        op_put(ep->iface, op);
        return status;
    }
    return UCS_INPROGRESS;
}

ucs_status_t ep_fence(uct_ep_h uct_ep, unsigned)
{
    to_ep(uct_ep)->fence_next = true;
    return UCS_OK;
}

void release_slot(rc_iface *iface, rc_ep *ep)
{
    iface->slots[ep->slot] = nullptr;
    iface->free_slots.push_back(ep->slot);
}

void free_ep(rc_ep *ep)
{
    rc_iface *iface = ep->iface;
    verbs::destroy_qp(ep->qp);
    release_slot(iface, ep);
    delete ep;
}

} // namespace

// ---------------------------------------------------------------- completions

void process_send_completion(rc_iface *iface, const ibv_wc &wc)
{
    uint32_t slot = static_cast<uint32_t>(wc.wr_id >> 32);
    uint32_t seq  = static_cast<uint32_t>(wc.wr_id);
    rc_ep *ep     = (slot < iface->slots.size()) ? iface->slots[slot] : nullptr;
    if (__builtin_expect(ep == nullptr, 0)) {
        ucs_debug("send completion for unknown slot %u", slot);
        return;
    }

    // Everything up to seq is done (RC completes in order).
    uint32_t done = seq - ep->completed_seq;
    if (done <= ep_outstanding(ep)) {
        iface->tx_outstanding -= done;
        ep->completed_seq      = seq;
    }

    ucs_status_t status = UCS_OK;
    if (__builtin_expect(wc.status != IBV_WC_SUCCESS, 0)) {
        status = verbs::status_from_wc(wc.status);
        if ((ep->st != rc_ep::state::failed) && !ep->destroyed) {
            ucs_debug("qp 0x%x: send completion error: %s", ep->qp->qp_num,
                      ibv_wc_status_str(wc.status));
            ep_fail(ep, status);
        }
        status = ep->error;
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

    if (ep->destroyed && (ep_outstanding(ep) == 0) && !iface->in_completion) {
        free_ep(ep);
    } else if (ep->destroyed && (ep_outstanding(ep) == 0)) {
        ++iface->deferred_frees; // freed by free_deferred() after the batch
    }
}

void free_deferred(rc_iface *iface)
{
    iface->deferred_frees = 0;
    for (rc_ep *ep : iface->slots) {
        if ((ep != nullptr) && ep->destroyed && (ep_outstanding(ep) == 0)) {
            free_ep(ep);
        }
    }
}

void dispatch_pending(rc_iface *iface)
{
    rc_ep **link = &iface->pending_eps;
    while (*link != nullptr) {
        rc_ep *ep = *link;
        if (dispatch_ep(ep)) {
            *link               = ep->pending_next;
            ep->on_pending_list = false;
        } else {
            link = &ep->pending_next;
        }
    }
}

void ep_fail(rc_ep *ep, ucs_status_t status)
{
    rc_iface *iface = ep->iface;
    ep->st          = rc_ep::state::failed;
    ep->error       = status;
    if (ep->qp != nullptr) {
        verbs::qp_to_error(ep->qp);
    }
    // Work that cannot complete any more completes now, with the error.
    while (ep->ops_head != nullptr) {
        tx_op *op    = ep->ops_head;
        ep->ops_head = op->next;
        retire_op(iface, op, status);
    }
    ep->ops_tail = nullptr;
    ucs_status_t s = uct_iface_handle_ep_err(&iface->super.super.super,
                                             &ep->super.super, status);
    (void)s;
}

// ---------------------------------------------------------------- lifecycle

ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("rc_zv: endpoints connect to an interface: the device and "
                  "interface addresses are required");
        return UCS_ERR_INVALID_PARAM;
    }
    rc_iface *iface = to_rc(params->iface);
    auto *ep        = new (std::nothrow) rc_ep{};
    if (ep == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    int init_count      = 1;
    ucs_status_t status = uct_base_ep_t_init(&ep->super, &uct_base_ep_t_class,
                                             &init_count, &iface->super.super);
    if (status != UCS_OK) {
        delete ep;
        return status;
    }
    ep->iface       = iface;
    ep->max_send_wr = iface->super.settings.tx_queue_len;
    std::memcpy(&ep->peer, params->dev_addr, sizeof(ep->peer));
    const auto *ia  = reinterpret_cast<const iface_addr *>(params->iface_addr);
    ep->peer_ud_qpn = ia->ud_qpn[0] | (ia->ud_qpn[1] << 8) | (ia->ud_qpn[2] << 16);

    verbs::connected_qp_params qp_params;
    qp_params.type        = IBV_QPT_RC;
    qp_params.max_send_wr = ep->max_send_wr;
    qp_params.max_inline  = iface->settings.max_inline;
    qp_params.send_cq     = iface->send_cq;
    qp_params.recv_cq     = iface->recv_cq;
    qp_params.srq         = iface->srq;
    unsigned inl;
    status = verbs::create_connected_qp(iface->super.md->dev, qp_params, &ep->qp, &inl);
    if (status != UCS_OK) {
        delete ep;
        return status;
    }

    if (iface->free_slots.empty()) {
        ep->slot = static_cast<uint32_t>(iface->slots.size());
        iface->slots.push_back(ep);
    } else {
        ep->slot = iface->free_slots.back();
        iface->free_slots.pop_back();
        iface->slots[ep->slot] = ep;
    }
    ep->conn_id = iface->next_conn_id++;
    iface->connecting.emplace(ep->conn_id, ep);
    status = iface->conn.start(ep->conn_id, ep->peer, ep->peer_ud_qpn, ep->qp->qp_num);
    if (status != UCS_OK) {
        iface->connecting.erase(ep->conn_id);
        free_ep(ep);
        return status;
    }
    *ep_p = &ep->super.super;
    return UCS_OK;
}

void ep_destroy(uct_ep_h uct_ep)
{
    rc_ep *ep       = to_ep(uct_ep);
    rc_iface *iface = ep->iface;
    if (ep->st == rc_ep::state::connecting) {
        iface->conn.stop(ep->conn_id);
        iface->connecting.erase(ep->conn_id);
    } else {
        iface->conn.disconnect(ep->conn_id, ep->peer, ep->peer_ud_qpn);
    }
    // Unlink from the pending list; its requests belong to the caller.
    for (rc_ep **link = &iface->pending_eps; *link != nullptr; link = &(*link)->pending_next) {
        if (*link == ep) {
            *link = ep->pending_next;
            break;
        }
    }
    ep->pending_head = ep->pending_tail = nullptr;
    // Work still queued completes as canceled, like UCX's own transports.
    while (ep->ops_head != nullptr) {
        tx_op *op    = ep->ops_head;
        ep->ops_head = op->next;
        retire_op(iface, op, UCS_ERR_CANCELED);
    }
    ep->ops_tail = nullptr;
    ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
    if (ep_outstanding(ep) == 0) {
        if (!iface->in_completion) {
            free_ep(ep);
        } else {
            ep->destroyed = true;
            ep->st        = rc_ep::state::failed;
            ++iface->deferred_frees;
        }
        return;
    }
    // Send WRs are still owned by the device: flush them and free the
    // endpoint when their completions arrived (process_send_completion).
    ep->destroyed = true;
    ep->st        = rc_ep::state::failed;
    ep->error     = UCS_ERR_CANCELED;
    if (ep_outstanding(ep) > 0) {
        verbs::qp_to_error(ep->qp);
    }
}

ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer,
                            uint32_t peer_qpn, ibv_qp **qp_p)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    verbs::connected_qp_params qp_params;
    qp_params.type        = IBV_QPT_RC;
    qp_params.max_send_wr = 1; // receive side only: RC acks are in hardware
    qp_params.max_inline  = 0;
    qp_params.send_cq     = iface->send_cq;
    qp_params.recv_cq     = iface->recv_cq;
    qp_params.srq         = iface->srq;
    unsigned inl;
    ucs_status_t status = verbs::create_connected_qp(iface->super.md->dev, qp_params,
                                                     qp_p, &inl);
    if (status != UCS_OK) {
        return status;
    }
    status = verbs::connect_qp(*qp_p, *iface->super.port, peer, peer_qpn,
                               remote_access, iface->settings.timing);
    if (status != UCS_OK) {
        verbs::destroy_qp(*qp_p);
    }
    return status;
}

void connection_established(void *arg, uint64_t conn_id, uint32_t peer_qpn)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    auto it         = iface->connecting.find(conn_id);
    if (it == iface->connecting.end()) {
        return;
    }
    rc_ep *ep = it->second;
    iface->connecting.erase(it);
    verbs::remote_port peer;
    peer.is_roce = (ep->peer.flags & 1) != 0;
    peer.lid     = ep->peer.lid;
    std::memcpy(peer.gid.raw, ep->peer.gid, sizeof(peer.gid.raw));
    ucs_status_t status = verbs::connect_qp(ep->qp, *iface->super.port, peer, peer_qpn,
                                            remote_access, iface->settings.timing);
    if (status != UCS_OK) {
        ep_fail(ep, status);
        return;
    }
    ep->st = rc_ep::state::connected;
    ucs_debug("rc_zv ep %p: qp 0x%x connected to qp 0x%x", ep, ep->qp->qp_num, peer_qpn);
    if (ep->pending_head != nullptr) {
        link_pending_ep(ep);
        dispatch_pending(iface);
    }
}

void connection_timed_out(void *arg, uint64_t conn_id)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    auto it         = iface->connecting.find(conn_id);
    if (it == iface->connecting.end()) {
        return;
    }
    rc_ep *ep = it->second;
    iface->connecting.erase(it);
    ucs_debug("rc_zv ep %p: no answer from the peer's interface (ud qp 0x%x)", ep,
              ep->peer_ud_qpn);
    ep_fail(ep, UCS_ERR_UNREACHABLE);
}

void fill_ep_ops(uct_iface_ops_t *ops, bool atomics)
{
    ops->ep_am_short       = am_short;
    ops->ep_am_short_iov   = am_short_iov;
    ops->ep_am_bcopy       = am_bcopy;
    ops->ep_am_zcopy       = am_zcopy;
    ops->ep_put_short      = put_short;
    ops->ep_put_bcopy      = put_bcopy;
    ops->ep_put_zcopy      = put_zcopy;
    ops->ep_get_bcopy      = get_bcopy;
    ops->ep_get_zcopy      = get_zcopy;
    if (atomics) {
        ops->ep_atomic64_post  = atomic64_post;
        ops->ep_atomic64_fetch = atomic64_fetch;
        ops->ep_atomic_cswap64 = atomic_cswap64;
    }
    ops->ep_pending_add    = pending_add;
    ops->ep_pending_purge  = pending_purge;
    ops->ep_flush          = ep_flush;
    ops->ep_fence          = ep_fence;
    ops->ep_create         = ep_create;
    ops->ep_destroy        = ep_destroy;
}

} // namespace zv::rc
