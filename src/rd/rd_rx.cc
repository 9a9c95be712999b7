// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram receive path: polling, fault injection, the
// reliability verdict, delivery to UCP, owed acknowledgements. What a
// packet is for is the transport's to find (rd_transport::rx).
#include "rd/rd_ep.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace zv::rd {

namespace {

constexpr unsigned rx_poll_batch = 16;

/// Where UCP's data starts in a receive buffer.
inline char *am_data(const rd_iface *iface, iface::buffer *b)
{
    return b->data() + iface->rx_offset + sizeof(rd_hdr);
}

} // namespace

void release_rx(uct_recv_desc_t *self, void *desc)
{
    rd_iface *iface = static_cast<rd_iface *>(
            reinterpret_cast<iface::release_desc *>(self)->owner);
    worker_scope scope(&iface->as.gate); // (the receive pool is the async side's too)
    --iface->rx_held;
    char *data = static_cast<char *>(desc) + iface->rx_headroom;
    iface::buffer_pool::put(iface->rx_pool.from_data(data - iface->rx_offset - sizeof(rd_hdr)));
}

namespace {

/// One received packet; consumes 'b' (null for an injected duplicate,
/// which only reaches the reliability checks).
void dispatch(rd_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b)
{
    if (!iface->tl->rx(iface, pkt, wc, b) && (b != nullptr)) {
        iface::buffer_pool::put(b);
    }
}

/// A completed receive, through the fault injector.
void receive_faulty(rd_iface *iface, iface::buffer *b, const ibv_wc &wc)
{
    switch (iface->fault.next()) {
    case iface::fault_injector::action::drop:
        iface::buffer_pool::put(b);
        return;
    case iface::fault_injector::action::dup: {
        char copy[max_rx_offset + sizeof(rd_hdr) + sizeof(creq_body)];
        ibv_wc wc_copy   = wc;
        wc_copy.byte_len = static_cast<uint32_t>(std::min<size_t>(wc.byte_len,
                                                                  sizeof(copy)));
        std::memcpy(copy, b->data(), wc_copy.byte_len);
        dispatch(iface, b->data(), wc, b);
        dispatch(iface, copy, wc_copy, nullptr);
        return;
    }
    case iface::fault_injector::action::hold:
        if (iface->held_buf == nullptr) {
            iface->held_buf = b;
            iface->held_wc  = wc;
            return;
        }
        break;
    case iface::fault_injector::action::pass:
        break;
    }
    dispatch(iface, b->data(), wc, b);
    if (iface->held_buf != nullptr) {
        // The held packet arrives after this one: reordered.
        iface::buffer *h = iface->held_buf;
        iface->held_buf  = nullptr;
        dispatch(iface, h->data(), iface->held_wc, h);
    }
}

} // namespace

/// Owed acks and NAKs that are due go out as packets of their own.
void send_acks(rd_iface *iface, ucs_time_t now)
{
    for (rx_conn **p = &iface->owe_conns; *p != nullptr;) {
        rx_conn *c = *p;
        if (!c->rx.owes()) {
            *p        = c->owe_next;
            c->on_owe = false;
            continue;
        }
        if (__builtin_expect(c->qp == nullptr, 0)) {
            p = &c->owe_next; // its QP is being reset (uc_zv): after that
            continue;
        }
        bool nak = c->rx.nak_due();
        if (nak || c->rx.ack_due(now)) {
            if (send_to_ep(iface, c, nak ? rd_hdr::nak : rd_hdr::ack, nullptr, 0) != UCS_OK) {
                return; // send queue full: next time
            }
            c->rx.acked();
            ++iface->acks_alone;
            *p        = c->owe_next;
            c->on_owe = false;
            continue;
        }
        p = &c->owe_next;
    }
}

template <bool Faults> unsigned poll_rx(rd_iface *iface)
{
    ibv_wc wc[rx_poll_batch];
    int n = ibv_poll_cq(iface->recv_cq.get(), rx_poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        auto *b = reinterpret_cast<iface::buffer *>(wc[i].wr_id);
        iface->rx_ring.consumed();
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) {
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_debug("qp 0x%x: receive completion error: %s", wc[i].qp_num,
                          ibv_wc_status_str(wc[i].status));
            }
            iface::buffer_pool::put(b);
            iface->tl->wc_error(iface, wc[i]);
            continue;
        }
        if (Faults) {
            receive_faulty(iface, b, wc[i]);
        } else {
            dispatch(iface, b->data(), wc[i], b);
        }
    }
    if (Faults && (n <= 0) && (iface->held_buf != nullptr)) {
        // Nothing came after the held packet: let it through now.
        iface::buffer *h = iface->held_buf;
        iface->held_buf  = nullptr;
        dispatch(iface, h->data(), iface->held_wc, h);
    }
    // What arrived may make an ack due at once (a gap, a duplicate, a
    // request, ack_every); a delayed one is the timers' (progress_begin).
    if ((n > 0) && (iface->owe_conns != nullptr)) {
        send_acks(iface, clock_now(iface));
    }
    if (__builtin_expect(iface->rx_ring.refill(), 0)) {
        rx_limit_update(iface);
    }
    return static_cast<unsigned>(n > 0 ? n : 0);
}

template unsigned poll_rx<false>(rd_iface *iface);
template unsigned poll_rx<true>(rd_iface *iface);

namespace {

/// invoke_am(), inline on the receive path.
[[gnu::always_inline]] inline bool deliver_am(rd_iface *iface, uint8_t am_id, iface::buffer *b,
                                              unsigned length)
{
    ucs_status_t status = uct_iface_invoke_am(&iface->super.super, am_id, am_data(iface, b),
                                              length, UCT_CB_PARAM_FLAG_DESC);
    if (status == UCS_OK) {
        return false;
    }
    // UCP keeps the data and releases it through release_rx().
    ++iface->rx_held;
    char *desc = am_data(iface, b) - iface->rx_headroom;
    *reinterpret_cast<uct_recv_desc_t **>(desc - sizeof(uct_recv_desc_t *)) =
            &iface->release_desc.super;
    return true;
}

/// An active message that would be delivered now cannot be taken: UCP
/// keeps all the descriptors it may, the ring could not be reposted in
/// full (no buffer left: the pool's bound, or locked memory), or the async
/// side holds all it may for a computing worker.
inline bool rx_full(const rd_iface *iface)
{
    return (iface->rx_held >= iface->rx_max_held) || iface->rx_ring.starved() ||
           (iface->as.active && (iface->as.deferred_ams >= iface->as.max_deferred_ams));
}

/// deliver_data()'s slow path (rx_hold_limit reached): true when an
/// active message that would be delivered now is refused. Not accepted
/// (the sender sends it again; its buffer goes back to the ring, which
/// stays posted), but answered, so that the sender knows its peer is
/// alive: backpressure, never a dead endpoint.
[[gnu::noinline]] bool refused(rd_iface *iface, rx_conn *c, const parsed_pkt &p,
                               const iface::buffer *b, bool am)
{
    if (!rx_full(iface) || !am || (b == nullptr) || (p.hdr.psn != c->rx.expected())) {
        return false;
    }
    ++(iface->as.active ? iface->as.refused : iface->rx_refused);
    ack_requested(iface, c);
    return true;
}

/// deliver_data() once it knows whether the receive path is at its limit
/// (Slow: refused, or deferred by the async side); the fast one tests
/// nothing of either.
template <bool Slow>
inline bool deliver(rd_iface *iface, rx_conn *c, const parsed_pkt &p, iface::buffer *b, bool am)
{
    const rd_hdr &hdr = p.hdr;
    if (Slow && refused(iface, c, p, b, am)) {
        return false;
    }
    rel::receiver::verdict v = c->rx.on_data(hdr.psn, clock_now(iface), p.ack_req);
    owe_link(iface, c);
    if (v == rel::receiver::verdict::duplicate) {
        ++iface->dup_rx;
        return false;
    }
    if ((v == rel::receiver::verdict::gap) || (b == nullptr)) {
        ++iface->gap_rx;
        return false;
    }
    if (!am) {
        return false; // a put: its data is in place, nothing to deliver
    }
    if (Slow && iface->as.active) {
        // (accepted: async_defer_am() has room, checked by refused())
        return async_defer_am(iface, hdr.am_id, b, static_cast<unsigned>(p.body_len));
    }
    return deliver_am(iface, hdr.am_id, b, static_cast<unsigned>(p.body_len));
}

[[gnu::noinline]] bool deliver_slow(rd_iface *iface, rx_conn *c, const parsed_pkt &p,
                                    iface::buffer *b, bool am)
{
    return deliver<true>(iface, c, p, b, am);
}

} // namespace

bool deliver_data(rd_iface *iface, rx_conn *c, const parsed_pkt &p, iface::buffer *b, bool am)
{
    if (__builtin_expect(iface->rx_held >= iface->rx_hold_limit, 0)) {
        return deliver_slow(iface, c, p, b, am);
    }
    return deliver<false>(iface, c, p, b, am);
}

bool invoke_am(rd_iface *iface, uint8_t am_id, iface::buffer *b, unsigned length)
{
    return deliver_am(iface, am_id, b, length);
}

void ack_requested(rd_iface *iface, rx_conn *c)
{
    c->rx.request_ack();
    owe_link(iface, c);
}

void owe_link(rd_iface *iface, rx_conn *c)
{
    if (!c->on_owe) {
        c->on_owe        = true;
        c->owe_next      = iface->owe_conns;
        iface->owe_conns = c;
    }
}

} // namespace zv::rd
