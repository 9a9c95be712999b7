// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint: connection, completions, pending, flush.
#include "rc/rc_ep_inl.h"
#include "util/nothrow.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

namespace zv::rc {

void finish_op(const tx_op *op)
{
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

void cq_starve(rc_iface *iface)
{
    if (iface->cq_starved) {
        return;
    }
    iface->cq_starved = true;
    ucs_debug("rc_zv iface %p: %u of %u send completion entries held: signaling the "
              "unsignaled tails", iface, iface->tx_outstanding, iface->settings.tx_cq_len);
    for (rc_ep *ep : iface->slots) {
        if ((ep != nullptr) && (signal_unsignaled_tail(ep) != UCS_OK) &&
            (iface->tx_outstanding >= iface->settings.tx_cq_len)) {
            break; // the reserve is used up; the rest once entries return
        }
    }
}

void tx_starve(rc_iface *iface)
{
    if (iface->tx_starved) {
        return;
    }
    iface->tx_starved = true;
    for (rc_ep *ep : iface->slots) {
        if (ep != nullptr) {
            (void)signal_unsignaled_tail(ep); // a full queue has signaled WRs in it
        }
    }
}

namespace {

constexpr int remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC;

/// An RC QP on the interface's CQs and SRQ, with a full send queue (an
/// endpoint's, or a passive one an endpoint may adopt), into *qp_p.
ucs_status_t create_qp(rc_iface *iface, verbs::qp *qp_p)
{
    verbs::connected_qp_params qp_params;
    qp_params.type        = IBV_QPT_RC;
    qp_params.max_send_wr = iface->super.settings.tx_queue_len;
    qp_params.max_inline  = iface->settings.max_inline;
    qp_params.send_cq     = iface->send_cq.get();
    qp_params.recv_cq     = iface->recv_cq.get();
    qp_params.srq         = iface->srq.get();
    unsigned inl;
    return verbs::create_connected_qp(iface->super.md->dev, qp_params, qp_p, &inl);
}

// ---------------------------------------------------------------- pending

void link_pending_ep(rc_ep *ep)
{
    if (!ep->on_pending_list) {
        ep->on_pending_list   = true;
        ep->pending_next      = ep->iface->pending_eps;
        ep->iface->pending_eps = ep;
    }
}

void unlink_pending_ep(rc_ep *ep)
{
    for (rc_ep **link = &ep->iface->pending_eps; *link != nullptr;
         link = &(*link)->pending_next) {
        if (*link == ep) {
            *link               = ep->pending_next;
            ep->on_pending_list = false;
            return;
        }
    }
}

} // namespace

ucs_status_t pending_add(uct_ep_h uct_ep, uct_pending_req_t *req, unsigned)
{
    rc_ep *ep = to_ep(uct_ep);
    return iface::pending_add(ep, req, check_tx(ep) == UCS_OK, link_pending_ep);
}

void pending_purge(uct_ep_h uct_ep, uct_pending_purge_callback_t cb, void *arg)
{
    to_ep(uct_ep)->pending.purge(cb, arg);
}

// ---------------------------------------------------------------- flush/fence

ucs_status_t ep_flush(uct_ep_h uct_ep, unsigned flags, uct_completion_t *comp)
{
    rc_ep *ep = to_ep(uct_ep);
    if (ep->st == rc_ep::state::failed) {
        return ep->error;
    }
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        ep->pending.purge(nullptr, nullptr);
    }
    if ((ep->st == rc_ep::state::connected) && (ep_outstanding(ep) == 0)) {
        return UCS_OK;
    }
    if (!ep->pending.empty()) {
        return UCS_ERR_NO_RESOURCE; // UCT: retry flush after pending drains
    }
    // A connecting endpoint's flush completes once it connected and what it
    // sent meanwhile completed: a waiter rides on a held signaled WR. (Not
    // NO_RESOURCE: pending_add would answer BUSY, since it may send, and
    // UCP's flush would retry at once, for ever.)
    if (comp == nullptr) {
        ucs_status_t status = signal_unsignaled_tail(ep);
        return (UCS_STATUS_IS_ERR(status) && (status != UCS_ERR_NO_RESOURCE)) ? status
                                                                              : UCS_INPROGRESS;
    }
    tx_op *op = op_get(ep->iface);
    if (op == nullptr) {
        return UCS_ERR_NO_RESOURCE;
    }
    op->comp = comp;
    if ((ep->st == rc_ep::state::connected) && (ep->signaled_seq == ep->posted_seq)) {
        // The last WR will report its completion: wait behind it.
        op->type = tx_op::flush_waiter;
        op->seq  = ep->posted_seq;
        ops_push(ep, op);
        return UCS_INPROGRESS;
    }
    // The tail is unsignaled: a signaled WR behind it carries the waiter.
    ucs_status_t status = signal_tail(ep, op);
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
    {
        iface::worker_scope scope(&iface->gate);
        iface->conn.release(ep->qp); // the peer may still send on it
    }
    release_slot(iface, ep);
    delete ep;
}


// ---------------------------------------------------------------- completions

void foreign_completion(rc_iface *iface, const ibv_wc &wc)
{
    uint32_t slot = static_cast<uint32_t>(wc.wr_id >> 32);
    if (slot == probe_slot) {
        --iface->tx_outstanding;
        iface::worker_scope scope(&iface->gate);
        iface->conn.probe_done(wc.qp_num, wc.status == IBV_WC_SUCCESS);
    } else {
        ucs_debug("send completion for unknown slot %u", slot);
    }
}

ucs_status_t completion_error(rc_ep *ep, const ibv_wc &wc)
{
    if ((ep->st != rc_ep::state::failed) && !ep->destroyed) {
        char why[96];
        snprintf(why, sizeof(why), "rc_zv qp 0x%x: send completion with error: %s",
                 ep->qp->qp_num, ibv_wc_status_str(wc.status));
        ep_fail(ep, verbs::status_from_wc(wc.status), why);
    }
    return ep->error;
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
    // A request may destroy or fail any endpoint, its own too, and add
    // requests anywhere. So the list is taken whole: its endpoints keep
    // on_pending_list set until visited (pending_add does not link them a
    // second time), destroyed ones stay allocated until the guard ends and
    // are skipped, and those with requests left are linked again.
    //
    // An endpoint whose requests used up the dispatch's budget while it
    // could still send is dispatched again by the next progress call
    // (pending_more), completions or not: its last sends may all be
    // unsignaled, and nothing else would come back for it.
    progress_guard guard(iface);
    rc_ep *ep           = iface->pending_eps;
    iface->pending_eps  = nullptr;
    iface->pending_more = false;
    while (ep != nullptr) {
        rc_ep *next         = ep->pending_next;
        ep->on_pending_list = false;
        if (!ep->destroyed && (ep->st == rc_ep::state::connected) &&
            !ep->pending.dispatch([ep] {
                return check_tx(ep, ep->iface->tx_cq_limit) == UCS_OK; // (resources)
            }) &&
            !ep->destroyed && (ep->st == rc_ep::state::connected)) {
            link_pending_ep(ep);
            iface->pending_more |= (check_tx(ep, iface->tx_cq_limit) == UCS_OK);
        }
        ep = next;
    }
}

int hold(rc_ep *ep, const ibv_send_wr *wr)
{
    const ucs_status_t status = util::try_alloc([&] {
        held_wr h;
        h.wr      = *wr;
        h.wr.next = nullptr;
        if (wr->send_flags & IBV_SEND_INLINE) {
            for (int i = 0; i < wr->num_sge; ++i) {
                const auto *p = reinterpret_cast<const char *>(wr->sg_list[i].addr);
                h.data.insert(h.data.end(), p, p + wr->sg_list[i].length);
            }
            h.sge.push_back({0, static_cast<uint32_t>(h.data.size()), 0}); // (addr: at post)
        } else {
            h.sge.assign(wr->sg_list, wr->sg_list + wr->num_sge);
        }
        ep->held.push_back(std::move(h));
    });
    return (status == UCS_OK) ? 0 : ENOMEM;
}

/// The endpoint's QP is connected: its held WRs go to it, in the order
/// made. 0, or the error of the first that failed (it and those after it
/// stay held).
static int post_held(rc_ep *ep)
{
    size_t posted = 0;
    int ret       = 0;
    for (held_wr &h : ep->held) {
        if (!h.data.empty()) {
            h.sge[0].addr = reinterpret_cast<uintptr_t>(h.data.data());
        }
        h.wr.sg_list = h.sge.data();
        h.wr.num_sge = static_cast<int>(h.sge.size());
        ibv_send_wr *bad;
        ret = ibv_post_send(ep->qp, &h.wr, &bad);
        if (ret != 0) {
            break;
        }
        ++posted;
    }
    ep->held.erase(ep->held.begin(), ep->held.begin() + static_cast<ptrdiff_t>(posted));
    if (ep->held.empty()) {
        ep->held.shrink_to_fit();
    }
    return ret;
}

void drop_held(rc_ep *ep)
{
    // Never posted: no completion will come for them (their ops are the
    // caller's to retire). They were the endpoint's last WRs.
    const auto n = static_cast<uint32_t>(ep->held.size());
    ep->posted_seq -= n;
    ep->signaled_seq = std::min(ep->signaled_seq, ep->posted_seq);
    ep->iface->tx_outstanding -= n;
    ep->held.clear();
}

void ep_fail(rc_ep *ep, ucs_status_t status, const char *why)
{
    rc_iface *iface = ep->iface;
    ep->st          = rc_ep::state::failed;
    ep->error       = status;
    if (ep->qp != nullptr) {
        verbs::qp_to_error(ep->qp);
    }
    drop_held(ep);
    // Work that cannot complete any more completes now, with the error.
    while (ep->ops_head != nullptr) {
        tx_op *op    = ep->ops_head;
        ep->ops_head = op->next;
        retire_op(iface, op, status);
    }
    ep->ops_tail = nullptr;
    if (ep->on_pending_list) {
        unlink_pending_ep(ep); // UCP purges the requests from its error callback
    }
    iface::report_ep_failure(&iface->super, &ep->super.super, status, why);
}

int ep_is_connected(uct_ep_h uct_ep, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *uct_iface_addr)
{
    const rc_ep *ep = to_ep(uct_ep);
    const auto *ia  = reinterpret_cast<const iface_addr *>(uct_iface_addr);
    return iface::same_device(ep->peer, dev_addr) &&
           (ep->peer_ud_qpn == iface::unpack_qpn(ia->ud_qpn));
}

// ---------------------------------------------------------------- lifecycle

ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    rc_iface *iface = (params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ? to_rc(params->iface) :
                                                                         nullptr;
    ucs_status_t status = iface::ep_create_allowed(params, iface ? &iface->super : nullptr);
    if (status != UCS_OK) {
        return status;
    }
    iface::worker_scope scope(&iface->gate); // claim(), start()
    rc_ep *ep;
    status = iface::new_ep(&iface->super, &ep);
    if (status != UCS_OK) {
        return status;
    }
    ep->iface       = iface;
    ep->max_send_wr = iface->super.settings.tx_queue_len;
    std::memcpy(&ep->peer, params->dev_addr, sizeof(ep->peer));
    const auto *ia  = reinterpret_cast<const iface_addr *>(params->iface_addr);
    ep->peer_ud_qpn = iface::unpack_qpn(ia->ud_qpn);

    // The QP the peer connected here for an endpoint of its own, if one
    // is unused: both directions then share it.
    ep->qp = iface->conn.claim(ep->peer, ep->peer_ud_qpn);
    if (ep->qp == nullptr) {
        verbs::qp qp;
        status = create_qp(iface, &qp);
        if (status != UCS_OK) {
            iface::delete_new_ep(ep);
            return status;
        }
        ep->qp = iface->conn.take(std::move(qp), ep->peer, ep->peer_ud_qpn);
        if (ep->qp == nullptr) {
            iface::delete_new_ep(ep);
            return UCS_ERR_NO_MEMORY; // (logged by take)
        }
    }

    // Its slot and its entry in 'connecting', and room for what may not
    // fail later: the slot's return to free_slots (free_ep), the async
    // side's record of how its connection went (connection_established).
    ep->conn_id = iface->next_conn_id++;
    status      = util::try_alloc([&] {
        if (iface->free_slots.empty()) {
            util::reserve_at_least(iface->free_slots, iface->slots.size() + 1);
            iface->slots.push_back(nullptr);
            iface->free_slots.push_back(static_cast<uint32_t>(iface->slots.size() - 1));
        }
        util::reserve_at_least(iface->async_outcomes,
                               iface->async_outcomes.size() + iface->connecting.size() + 1);
        iface->connecting.emplace(ep->conn_id, ep);
    });
    if (status != UCS_OK) {
        ucs_error("rc_zv: no memory for a new endpoint");
        iface->connecting.erase(ep->conn_id);
        iface->conn.release(ep->qp); // (inside the scope above)
        iface::delete_new_ep(ep);
        return status;
    }
    ep->slot = iface->free_slots.back();
    iface->free_slots.pop_back();
    iface->slots[ep->slot] = ep;
    ep->wr_id_base = static_cast<uint64_t>(ep->slot) << 32;
    status = iface->conn.start(ep->conn_id, ep->qp);
    if (status != UCS_OK) {
        iface->connecting.erase(ep->conn_id);
        ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
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
        iface->connecting.erase(ep->conn_id);
    }
    // Unlink from the pending list; its requests belong to the caller.
    if (ep->on_pending_list) {
        unlink_pending_ep(ep); // (not found while dispatch_pending holds the list)
    }
    ep->pending = iface::pending_queue();
    drop_held(ep);
    // Work still queued completes as canceled, like UCX's own transports.
    while (ep->ops_head != nullptr) {
        tx_op *op    = ep->ops_head;
        ep->ops_head = op->next;
        retire_op(iface, op, UCS_ERR_CANCELED);
    }
    ep->ops_tail = nullptr;
    ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
    if (ep_outstanding(ep) == 0) {
        if (!iface->in_progress) {
            free_ep(ep);
        } else {
            // A callback inside progress: the caller still holds it.
            ep->destroyed = true;
            ep->st        = rc_ep::state::failed;
            ++iface->deferred_frees;
        }
        return;
    }
    // Send WRs are still owned by the device: the endpoint is freed when
    // their completions arrived (process_send_completion). The QP is not
    // flushed into the error state, since the peer's endpoint may share
    // it: RC completes every WR within its retry limit (RETRY_COUNT <= 6),
    // and a signaled WR at the tail reports the unsignaled ones. Only when
    // none can be posted (the interface's completion queue is full) is the
    // QP flushed after all.
    if ((ep->st == rc_ep::state::connected) && (signal_unsignaled_tail(ep) != UCS_OK)) {
        verbs::qp_to_error(ep->qp);
    }
    ep->destroyed = true;
    ep->st        = rc_ep::state::failed;
    ep->error     = UCS_ERR_CANCELED;
}

namespace {

/// For the worker (rc_async.cc). ep_create() made room for one record per
/// connecting endpoint besides those not yet handed over, and each has at
/// most one: growing here is only a fallback.
void defer_outcome(rc_iface *iface, uint64_t conn_id, uint32_t peer_qpn, ucs_status_t status,
                   const char *why)
{
    auto &q = iface->async_outcomes;
    if (__builtin_expect(q.size() == q.capacity(), 0) &&
        (util::try_alloc([&] { util::reserve_at_least(q, q.size() + 1); }) != UCS_OK)) {
        // (Not reached: ep_create() made room for every connecting endpoint.)
        ucs_error("rc_zv: no memory to record how connection %lu went: its endpoint "
                  "never hears", static_cast<unsigned long>(conn_id));
        return;
    }
    async_outcome o = {conn_id, peer_qpn, status, {}};
    std::snprintf(o.why, sizeof(o.why), "%s", why);
    q.push_back(o);
}

} // namespace

ucs_status_t connect_ep_qp(void *arg, ibv_qp *qp, const verbs::remote_port &peer,
                           uint32_t peer_qpn)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    return verbs::connect_qp(qp, *iface->super.port, peer, peer_qpn, remote_access,
                             iface->settings.timing);
}

ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer,
                            uint32_t peer_qpn, verbs::qp *qp_p)
{
    // A full send queue: an endpoint of ours may adopt it (conn_manager::claim).
    rc_iface *iface     = static_cast<rc_iface *>(arg);
    verbs::qp qp;
    ucs_status_t status = create_qp(iface, &qp);
    if (status == UCS_OK) {
        status = connect_ep_qp(iface, qp.get(), peer, peer_qpn);
    }
    if (status == UCS_OK) {
        *qp_p = std::move(qp);
    }
    return status;
}

ucs_status_t probe_qp(void *arg, ibv_qp *qp)
{
    // A zero-length RDMA WRITE: the peer's device acknowledges it (no
    // memory is touched), or, with its QP gone, the retries run out. It
    // takes a slot of the interface's send completion queue like any WR.
    rc_iface *iface = static_cast<rc_iface *>(arg);
    if ((iface->tx_outstanding >= iface->settings.tx_cq_len) || iface->async_active) {
        return UCS_ERR_NO_RESOURCE; // (the async side leaves sends to the worker)
    }
    ibv_send_wr wr = {};
    wr.wr_id       = static_cast<uint64_t>(probe_slot) << 32;
    wr.opcode      = IBV_WR_RDMA_WRITE;
    wr.send_flags  = IBV_SEND_SIGNALED;
    ibv_send_wr *bad;
    int ret = ibv_post_send(qp, &wr, &bad);
    if (ret != 0) {
        ucs_debug("qp 0x%x: cannot post a probe: %s", qp->qp_num, strerror(ret));
        return verbs::status_from_errno(ret);
    }
    ++iface->tx_outstanding;
    return UCS_OK;
}

void connection_established(void *arg, uint64_t conn_id, uint32_t peer_qpn)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    if (iface->async_active) {
        defer_outcome(iface, conn_id, peer_qpn, UCS_OK, "");
        // The endpoint and UCP hear it from the worker (progress_conn), and
        // what the endpoint sent while it connected leaves then: rc_zv's
        // send path does not take the async gate, so the async side never
        // touches an endpoint.
        return;
    }
    auto it         = iface->connecting.find(conn_id);
    if (it == iface->connecting.end()) {
        return;
    }
    rc_ep *ep = it->second;
    iface->connecting.erase(it);
    ep->st = rc_ep::state::connected;
    ucs_debug("rc_zv ep %p: qp 0x%x connected to qp 0x%x", ep, ep->qp->qp_num, peer_qpn);
    const int ret = ep->held.empty() ? 0 : post_held(ep);
    if (ret != 0) {
        char why[128];
        snprintf(why, sizeof(why), "posting what was sent while it connected failed: %s",
                 strerror(ret));
        ep_fail(ep, verbs::status_from_errno(ret), why);
        return;
    }
    if (!ep->pending.empty()) {
        link_pending_ep(ep);
        dispatch_pending(iface);
    }
}

void connection_failed(void *arg, uint64_t conn_id, ucs_status_t status, const char *why)
{
    rc_iface *iface = static_cast<rc_iface *>(arg);
    if (iface->async_active) {
        defer_outcome(iface, conn_id, 0, status, why);
        return;
    }
    auto it         = iface->connecting.find(conn_id);
    if (it == iface->connecting.end()) {
        return;
    }
    rc_ep *ep = it->second;
    iface->connecting.erase(it);
    char what[128];
    snprintf(what, sizeof(what), "rc_zv: connecting to ud qp 0x%x: %s", ep->peer_ud_qpn,
             why);
    ep_fail(ep, status, what);
}

} // namespace zv::rc
