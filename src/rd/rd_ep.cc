// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram endpoint: active messages, acks, retransmission,
// flush, lifecycle; the interface's lists of endpoints with pending
// requests and of destroyed ones.
#include "rd/rd_send.h"

#include "iface/check.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace zv::rd {

namespace {

constexpr size_t am_zcopy_max_hdr = 64;

/// How long ep_release() waits for the send queue to pass a destroyed
/// endpoint's zero-copy sends. UD and UC sends complete at the sender,
/// without the peer: this is long only when the device does not complete
/// them at all.
constexpr double destroy_wait_sec = 1.0;

/// Release callback of the sender: the packet was acknowledged.
struct on_acked {
    rd_ep *ep;
    void operator()(rel::tx_pkt *p) const
    {
        auto *d = reinterpret_cast<tx_desc *>(p);
        if (ep->resend_next == d) {
            ep->resend_next = reinterpret_cast<tx_desc *>(p->next);
        }
        d->acked = true;
        if (d->in_flight == 0) {
            release_desc(ep->iface, d);
        }
    }
};

} // namespace

// ---------------------------------------------------------------- am

ucs_status_t ep_am_short(uct_ep_h uct_ep, uint8_t id, uint64_t header,
                         const void *payload, unsigned length)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    ucs_status_t status = iface::check_am(&ep->iface->super, "am_short", id, "header + payload",
                                          sizeof(header) + length, ep->iface->max_payload);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = desc_get(ep, rd_hdr::data, sizeof(header) + length);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    d->hdr()->am_id = id;
    piggyback(ep, d->hdr());
    std::memcpy(d->payload(), &header, sizeof(header));
    copy_short(d->payload() + sizeof(header), payload, length);
    send_desc(ep, d, sizeof(header) + length);
    return UCS_OK;
}

ucs_status_t ep_am_short_iov(uct_ep_h uct_ep, uint8_t id, const uct_iov_t *iov,
                             size_t iovcnt)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    const size_t total  = iface::iov_total(iov, iovcnt);
    // (max_short: what iface_query promises; no header of its own)
    ucs_status_t status = iface::check_am(&ep->iface->super, "am_short_iov", id, "payload",
                                          total, ep->iface->max_payload);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = desc_get(ep, rd_hdr::data, total);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    d->hdr()->am_id = id;
    piggyback(ep, d->hdr());
    char *p = d->payload();
    for (size_t i = 0; i < iovcnt; ++i) {
        size_t n = iov[i].length * std::max<unsigned>(iov[i].count, 1);
        std::memcpy(p, iov[i].buffer, n);
        p += n;
    }
    send_desc(ep, d, total);
    return UCS_OK;
}

ssize_t ep_am_bcopy(uct_ep_h uct_ep, uint8_t id, uct_pack_callback_t pack_cb,
                    void *arg, unsigned)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_bcopy", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = desc_get(ep, rd_hdr::data, SIZE_MAX); // pack_cb decides the size
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    size_t length = pack_cb(d->payload(), arg);
    if (__builtin_expect(length > ep->iface->max_payload, 0)) {
        ucs_error("%s: am_bcopy: invalid length %zu packed (expected <= %u)",
                  ep->iface->tl->name, length, ep->iface->max_payload);
        iface::buffer_pool::put(d->buf);
        return UCS_ERR_INVALID_PARAM;
    }
    d->hdr()->am_id = id;
    piggyback(ep, d->hdr());
    send_desc(ep, d, length);
    return static_cast<ssize_t>(length);
}

ucs_status_t ep_am_zcopy(uct_ep_h uct_ep, uint8_t id, const void *header,
                         unsigned header_length, const uct_iov_t *iov,
                         size_t iovcnt, unsigned, uct_completion_t *comp)
{
    rd_ep *ep           = to_ep(uct_ep);
    rd_iface *iface     = ep->iface;
    worker_scope scope(&ep->iface->as.gate);
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_zcopy", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "am_zcopy", "header", header_length,
                                     std::min<size_t>(am_zcopy_max_hdr, iface->max_payload));
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_iovcnt(&ep->iface->super, "am_zcopy", iovcnt, max_sge - 1);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "am_zcopy", "header + payload",
                                     header_length + iface::iov_total(iov, iovcnt),
                                     iface->max_payload);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = desc_get(ep, rd_hdr::data, header_length);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    d->hdr()->am_id = id;
    piggyback(ep, d->hdr());
    std::memcpy(d->payload(), header, header_length);
    if (__builtin_expect(!add_iov(d, iov, iovcnt), 0)) {
        iface::buffer_pool::put(d->buf);
        return UCS_ERR_INVALID_PARAM;
    }
    d->comp = comp;
    send_desc(ep, d, header_length);
    return UCS_INPROGRESS;
}

// ---------------------------------------------------------------- pending, flush

ucs_status_t ep_pending_add(uct_ep_h uct_ep, uct_pending_req_t *req, unsigned)
{
    rd_ep *ep = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    return iface::pending_add(ep, req, check_tx(ep) == UCS_OK, pending_link);
}

void ep_pending_purge(uct_ep_h uct_ep, uct_pending_purge_callback_t cb, void *arg)
{
    rd_ep *ep = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    ep->pending.purge(cb, arg);
}

ucs_status_t ep_flush(uct_ep_h uct_ep, unsigned flags, uct_completion_t *comp)
{
    rd_ep *ep = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    if (ep->st == rd_ep::state::failed) {
        return ep->error;
    }
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        ep->pending.purge(nullptr, nullptr);
    }
    // Nothing outstanding: done, whatever waits in the pending queue (UCP
    // flushes with its own requests queued there: Open MPI's one-sided
    // lock hung in 2 of 3 runs when this answered NO_RESOURCE).
    if ((ep->st == rd_ep::state::connected) && (ep->unreleased == 0)) {
        return UCS_OK;
    }
    if (!ep->pending.empty()) {
        return UCS_ERR_NO_RESOURCE; // UCT: retry flush after pending drains
    }
    // (A connecting endpoint's flush completes once it connected and what
    // it sent meanwhile was acknowledged. Not NO_RESOURCE: pending_add
    // would answer BUSY, since it may send, and UCP's flush would retry
    // at once, for ever.)
    if ((comp != nullptr) &&
        (util::try_alloc([&] { ep->flush_waiters.push_back(comp); }) != UCS_OK)) {
        return UCS_ERR_NO_MEMORY;
    }
    request_ack(ep);
    return UCS_INPROGRESS;
}

ucs_status_t ep_fence(uct_ep_h, unsigned)
{
    return UCS_OK; // one ordered stream per endpoint: nothing overtakes
}

ucs_status_t ep_get_address(uct_ep_h, uct_ep_addr_t *)
{
    return UCS_ERR_UNSUPPORTED;
}

int ep_is_connected(uct_ep_h uct_ep, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *uct_iface_addr)
{
    const rd_ep *ep = to_ep(uct_ep);
    const auto *ia  = reinterpret_cast<const iface_addr *>(uct_iface_addr);
    return iface::same_device(ep->peer, dev_addr) && (ep->peer_qpn == iface::unpack_qpn(ia->qpn));
}

// ---------------------------------------------------------------- shared

void send_desc(rd_ep *ep, tx_desc *d, size_t len)
{
    d->sge[0] = {reinterpret_cast<uintptr_t>(d->hdr()),
                 static_cast<uint32_t>(sizeof(rd_hdr) + len), d->buf->lkey};
    number_desc(ep, d);
    post_numbered(ep, d);
}

void request_ack(rd_ep *ep)
{
    if ((ep->st != rd_ep::state::connected) || ep->tx.idle() ||
        (ep->ack_requested && (ep->ack_requested_psn == ep->tx.next_psn()))) {
        return; // nothing unacknowledged, or asked already for all of it
    }
    if (send_to_conn(ep, rd_hdr::ack_req, nullptr, 0) == UCS_OK) {
        ep->ack_requested     = true;
        ep->ack_requested_psn = ep->tx.next_psn();
    } // else the send queue is full: the next flush asks again
}

void busy_link(rd_ep *ep)
{
    if (!ep->on_busy) {
        ep->on_busy         = true;
        ep->busy_next       = ep->iface->busy_eps;
        ep->iface->busy_eps = ep;
    }
}

/// Post the window from the cursor (resend_next) on, as far as the send
/// queue allows; the timer walk continues what is left. 'first': the
/// packets were never posted (held for the connection).
static unsigned post_from_cursor(rd_ep *ep, bool first)
{
    rd_iface *iface = ep->iface;
    unsigned n      = 0;
    while ((ep->resend_next != nullptr) &&
           (iface->tx_outstanding < iface->tx_limit) && ep->tx.in_cwnd(&ep->resend_next->pkt)) {
        tx_desc *d      = ep->resend_next;
        ep->resend_next = reinterpret_cast<tx_desc *>(d->pkt.next);
        if (post_desc(iface, ep, d, first) != UCS_OK) {
            ep->resend_next = nullptr; // the timer will try again
            break;
        }
        ++n;
    }
    if (ep->resend_next != nullptr) {
        // The timer walk continues it when slots free up; the acks of what
        // went, when the congestion window is what stopped it (ep_packet).
        busy_link(ep);
    }
    return n;
}

unsigned resend_continue(rd_ep *ep)
{
    rd_iface *iface = ep->iface;
    if (__builtin_expect(ep->st != rd_ep::state::connected, 0)) {
        // Connecting: only the CREQ goes again (ud_zv); what follows it
        // waits for the connection (post_held).
        tx_desc *d      = ep->resend_next;
        ep->resend_next = nullptr;
        if ((d == nullptr) || (&d->pkt != ep->tx.head()) || !is_creq(d) ||
            (post_desc(iface, ep, d, false) != UCS_OK)) {
            return 0;
        }
        ++iface->resent;
        return 1;
    }
    unsigned n = post_from_cursor(ep, false);
    iface->resent += n;
    return n;
}

void post_held(rd_ep *ep)
{
    tx_desc *first = nullptr;
    for (rel::tx_pkt *p = ep->tx.head(); p != nullptr; p = p->next) {
        auto *d = reinterpret_cast<tx_desc *>(p);
        if (!is_creq(d)) {
            first          = (first == nullptr) ? d : first;
            d->hdr()->dest = ep->peer_conn; // (0 until now)
        } // (ud_zv's CREQ, sent and acknowledged by the CREP)
    }
    if (first == nullptr) {
        return;
    }
    ep->tx.start(clock_now(ep->iface));
    ep->resend_next = first;
    (void)post_from_cursor(ep, true);
}

void resend_all(rd_ep *ep)
{
    ep->resend_next = reinterpret_cast<tx_desc *>(ep->tx.head());
    resend_continue(ep);
}

void ep_complete_flush(rd_ep *ep)
{
    std::vector<uct_completion_t *> waiters;
    waiters.swap(ep->flush_waiters);
    ucs_status_t status = (ep->st == rd_ep::state::failed) ? ep->error : UCS_OK;
    for (uct_completion_t *c : waiters) {
        if (__builtin_expect(ep->iface->as.active, 0)) {
            async_defer_completion(ep->iface, c, status, ep->id);
        } else {
            uct_invoke_completion(c, status);
        }
    }
}

bool ep_dispatch_pending(rd_ep *ep)
{
    return ep->pending.dispatch([ep] {
        rd_iface *iface = ep->iface;
        return (ep->st != rd_ep::state::failed) && !ep->tx.window_full() &&
               (ep->resend_next == nullptr) &&
               (iface->tx_outstanding < iface->tx_limit);
    });
}

void ep_fail(rd_ep *ep, ucs_status_t status, const char *why)
{
    if (ep->st == rd_ep::state::failed) {
        return;
    }
    rd_iface *iface = ep->iface;
    if (iface->as.active) {
        async_defer_ep_fail(iface, ep->id, status, why); // UCP hears it from the worker
        return;
    }
    ep->st          = rd_ep::state::failed;
    ep->error       = status;
    ep->resend_next = nullptr;
    ep->tx.purge([ep, status](rel::tx_pkt *p) {
        auto *d   = reinterpret_cast<tx_desc *>(p);
        d->status = status;
        settle_dropped(ep->iface, d);
    });
    ep_check_flushed(ep);
    char what[160];
    snprintf(what, sizeof(what), "%s endpoint %p to qp 0x%x: %s", iface->tl->name,
             static_cast<void *>(ep), ep->peer_qpn, why);
    iface::report_ep_failure(&iface->super, &ep->super.super, status, what);
}

void handle_ep_packet(rd_iface *iface, const rd_hdr &hdr, uint32_t src_qp, uint32_t conn_id)
{
    uint32_t id  = (hdr.type == rd_hdr::data) ? hdr.ack_dest : hdr.dest;
    rd_ep *ep = iface->eps.find(id);
    if ((ep == nullptr) || (ep->peer_qpn != src_qp) ||
        (ep->st == rd_ep::state::failed)) {
        ++iface->bad_rx;
        return; // stale (endpoint gone), or not from its peer
    }
    if ((ep->st == rd_ep::state::connecting) && (hdr.type != rd_hdr::crep)) {
        return; // only the CREP may acknowledge the CREQ
    }
    ep_packet(ep, hdr, conn_id);
}

void ep_packet(rd_ep *ep, const rd_hdr &hdr, uint32_t conn_id)
{
    rd_iface *iface = ep->iface;
    ucs_time_t now  = clock_now(iface);
    switch (hdr.type) {
    case rd_hdr::data:
    case rd_hdr::ack:
        ep->tx.heard(now);
        if ((ep->tx.ack(hdr.ack_psn, now, on_acked{ep}) > 0) &&
            __builtin_expect(ep->resend_next != nullptr, 0)) {
            resend_continue(ep); // the congestion window grew
        }
        break;
    case rd_hdr::nak:
        ep->tx.heard(now);
        if (ep->tx.nak(hdr.ack_psn, now, on_acked{ep})) {
            resend_all(ep);
        }
        break;
    case rd_hdr::crep:
        if (ep->st == rd_ep::state::connecting) {
            ep->peer_conn = conn_id;
            ep->st        = rd_ep::state::connected;
            ucs_debug("%s: endpoint %p connected to qp 0x%x conn 0x%x", iface->tl->name,
                      ep, ep->peer_qpn, conn_id);
            ep->tx.ack(hdr.ack_psn, now, on_acked{ep});
            ep->tx.open_cwnd(); // (a CREQ resent is no congestion)
            post_held(ep);      // what was sent while it connected
            break;
        }
        if (ep->peer_conn != conn_id) {
            ++iface->bad_rx;
            return;
        }
        ep->tx.ack(hdr.ack_psn, now, on_acked{ep});
        break;
    case rd_hdr::rebind:
        // Our receive connection at the peer was reclaimed while we were
        // silent and is back under a new id (ud_reclaim.cc): what is in
        // the window goes again, to it.
        if (ep->st != rd_ep::state::connected) {
            ++iface->bad_rx;
            return;
        }
        ep->peer_conn = conn_id;
        for (rel::tx_pkt *p = ep->tx.head(); p != nullptr; p = p->next) {
            reinterpret_cast<tx_desc *>(p)->hdr()->dest = conn_id;
        }
        if (ep->tx.nak(hdr.ack_psn, now, on_acked{ep})) {
            resend_all(ep);
        }
        break;
    default:
        ++iface->bad_rx;
        return;
    }
    pending_link(ep);
}

ucs_status_t ep_check(uct_ep_h uct_ep, unsigned flags, uct_completion_t *comp)
{
    rd_ep *ep = to_ep(uct_ep);
    if ((flags != 0) || (comp != nullptr)) {
        ucs_error("%s: ep_check: flags 0x%x and a completion are not supported",
                  ep->iface->tl->name, flags);
        return UCS_ERR_INVALID_PARAM;
    }
    worker_scope scope(&ep->iface->as.gate);
    return (ep->st == rd_ep::state::failed) ? ep->error : UCS_OK;
}

void pending_link(rd_ep *ep)
{
    if (!ep->pending.empty() && !ep->on_pending) {
        ep->on_pending         = true;
        ep->pending_next       = ep->iface->pending_eps;
        ep->iface->pending_eps = ep;
    }
}

void ep_connected(rd_ep *ep)
{
    ep->st = rd_ep::state::connected;
    post_held(ep);
    ep_check_flushed(ep); // a flush of nothing waited for the connection
    pending_link(ep);
}

// ---------------------------------------------------------------- lifecycle

ucs_status_t ep_new(const uct_ep_params_t *params, rd_ep **ep_p)
{
    rd_iface *iface = (params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ? to_rd(params->iface) :
                                                                         nullptr;
    ucs_status_t status = iface::ep_create_allowed(params, iface ? &iface->super : nullptr);
    if (status != UCS_OK) {
        return status;
    }
    const char *tl = iface->tl->name;
    if (iface->eps.full()) {
        ucs_error("%s: too many endpoints on one interface (%u)", tl, id_index_mask);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    // Room for what may not fail later: its id (ep_register), its place in
    // the graveyard (ep_release), the async side's record of its failure.
    async_state &as = iface->as;
    if ((iface->eps.reserve() != UCS_OK) ||
        (util::try_alloc([&] {
             util::reserve_at_least(iface->graveyard,
                                    iface->graveyard.size() + iface->eps.count() + 1);
             util::reserve_at_least(as.deferred, as.deferred.size() + async_room_base +
                                                         iface->eps.count() + 1);
         }) != UCS_OK)) {
        ucs_error("%s: no memory for a new endpoint", tl);
        return UCS_ERR_NO_MEMORY;
    }
    rd_ep *ep;
    status = iface::new_ep(&iface->super, &ep);
    if (status != UCS_OK) {
        return status;
    }
    ep->iface = iface;
    ep->sq    = iface->tl->own_send_queues ? &ep->own_sq : &iface->sq;
    std::memcpy(&ep->peer, params->dev_addr, sizeof(ep->peer));
    const auto *ia = reinterpret_cast<const iface_addr *>(params->iface_addr);
    ep->peer_qpn   = iface::unpack_qpn(ia->qpn);
    ep->target.ud.remote_qpn  = ep->peer_qpn;
    ep->target.ud.remote_qkey = iface->qkey;
    ep->tx.init(&iface->settings.rel);
    *ep_p = ep;
    return UCS_OK;
}

void ep_register(rd_ep *ep)
{
    ep->id = ep->iface->eps.add(ep);
}

void ep_discard(rd_ep *ep)
{
    ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
    ep_free(ep);
}

void ep_free(rd_ep *ep)
{
    // An unsignaled tail on its own QP, which no completion will cover
    // now: every descriptor was released, so the QP has read those work
    // requests (they were acknowledged, or a later completion said so).
    rd_iface *iface          = ep->iface;
    iface->tx_outstanding   -= ep->own_sq.unsignaled;
    iface->tx_silent        -= ep->own_sq.unsignaled;
    ep->own_sq.unsignaled    = 0;
    if (iface->tl->ep_freed != nullptr) {
        iface->tl->ep_freed(ep);
    }
    delete ep;
}

namespace {

/*
 * A destroyed endpoint's zero-copy sends (the descriptors with a
 * completion) are completed before uct_ep_destroy() returns, as UCT's
 * callers expect (UCP's forced close frees its requests after it), but a
 * completion hands the user's buffer back, so it may only come once no
 * posted work request can read that buffer: the descriptor's release
 * (release_desc), which waits for an acknowledgement or for the send queue
 * to have passed every posting of it (settle_dropped). A UD or UC send
 * completes at the sender, so polling the send CQ gets there in
 * microseconds. It is polled here, with a bound (destroy_wait_sec): the
 * completions of the interface's other sends are handled on the way, and
 * callbacks may destroy further endpoints, whose frees are deferred as
 * inside progress. A device that completes nothing in that time (a QP
 * stuck in the error state until progress resets it), or a lost one (not
 * waited for), is the one case left: its buffers are still the device's,
 * so those completions are never called (a request that never ends,
 * logged), not called early.
 */
[[gnu::cold, gnu::noinline]] void wait_for_comps(rd_ep *ep)
{
    rd_iface *iface   = ep->iface;
    const bool nested = iface->in_progress != 0;
    ++iface->in_progress;
    if (!nested) {
        iface->now_valid = false;
    }
    const ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(destroy_wait_sec);
    // (A lost device completes nothing: no endpoint waits for it.)
    while ((ep->comps_unreleased != 0) && !iface->super.device_lost) {
        const unsigned n = poll_tx(iface);
        if ((iface->parked != nullptr) || (iface->settling != nullptr)) {
            settle_parked(iface); // (nested in it: the rest of its list first)
        }
        if ((n == 0) && (ucs_get_time() > deadline)) {
            break;
        }
    }
    --iface->in_progress;
    if (ep->comps_unreleased != 0) {
        ep->comps_abandoned = true;
        ucs_warn("%s: endpoint %p destroyed with %u zero-copy sends the device did not "
                 "complete%s: their completions will not be called", iface->tl->name,
                 static_cast<void *>(ep), ep->comps_unreleased,
                 iface->super.device_lost ? " (device lost)" : " within the wait");
    }
    if (!nested && !iface->graveyard.empty()) {
        free_deferred(iface);
    }
}

} // namespace

void ep_release(rd_ep *ep)
{
    rd_iface *iface = ep->iface;
    if (__builtin_expect(async_waiting(iface), 0)) {
        async_forget_ep(iface, ep->id);
    }
    ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
    ep->pending.purge(nullptr, nullptr);
    ep->resend_next = nullptr;
    ep->destroyed   = true; // (release_desc leaves its flush waiters to us)
    // What was not acknowledged is canceled, as by UCX's transports; each
    // descriptor is released, and its completion called, once no work
    // request can read it (settle_dropped): now, or in wait_for_comps().
    ep->tx.purge([ep](rel::tx_pkt *p) {
        auto *d   = reinterpret_cast<tx_desc *>(p);
        d->status = UCS_ERR_CANCELED;
        settle_dropped(ep->iface, d);
    });
    if (ep->partner != nullptr) {
        ep->partner->partner = nullptr;
        ep->partner          = nullptr;
    }
    for (rd_ep **p = &iface->busy_eps; *p != nullptr; p = &(*p)->busy_next) {
        if (*p == ep) {
            *p = ep->busy_next;
            break;
        }
    }
    for (rd_ep **p = &iface->pending_eps; *p != nullptr; p = &(*p)->pending_next) {
        if (*p == ep) {
            *p = ep->pending_next;
            break;
        }
    }
    iface->eps.remove(ep->id);
    if (__builtin_expect(ep->comps_unreleased != 0, 0)) {
        wait_for_comps(ep);
    }
    // A flush waited for sends that are now completed or canceled.
    std::vector<uct_completion_t *> waiters;
    waiters.swap(ep->flush_waiters);
    if (!ep->comps_abandoned) {
        for (uct_completion_t *c : waiters) {
            uct_invoke_completion(c, UCS_ERR_CANCELED);
        }
    }
    if ((ep->unreleased == 0) && !iface->in_progress) {
        ep_free(ep);
    } else {
        iface->graveyard.push_back(ep);
    }
}

void dispatch_pending(rd_iface *iface)
{
    rd_ep *list        = iface->pending_eps;
    iface->pending_eps = nullptr;
    while (list != nullptr) {
        rd_ep *ep      = list;
        list           = ep->pending_next;
        ep->on_pending = false;
        if (ep->destroyed) {
            continue;
        }
        if (!ep_dispatch_pending(ep)) {
            pending_link(ep);
        }
    }
}

void free_deferred(rd_iface *iface)
{
    auto &g = iface->graveyard;
    for (size_t i = 0; i < g.size();) {
        if (g[i]->unreleased == 0) {
            ep_free(g[i]);
            g[i] = g.back();
            g.pop_back();
        } else {
            ++i;
        }
    }
}

} // namespace zv::rd
