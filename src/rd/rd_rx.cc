// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram receive path: the reliability verdict, delivery to
// UCP, owed acknowledgements. Polling and fault injection are compiled into
// each transport's progress (rd_progress_inl.h), which finds what a packet
// is for.
#include "rd/rd_progress_inl.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <cstring>
#include <new>

namespace zv::rd {

namespace {

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

void rx_failed(rd_iface *iface, iface::buffer *b, const ibv_wc &wc)
{
    if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        ucs_debug("qp 0x%x: receive completion error: %s", wc.qp_num,
                  ibv_wc_status_str(wc.status));
    }
    iface::buffer_pool::put(b);
    iface->tl->wc_error(iface, wc);
}

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
                               const iface::buffer *b)
{
    if (!rx_full(iface) || (b == nullptr) || (p.hdr.psn != c->rx.expected())) {
        return false;
    }
    ++(iface->as.active ? iface->as.refused : iface->rx_refused);
    ack_requested(iface, c);
    return true;
}

/// The reliability verdict on a reliable packet for c: true when it is the
/// next in order and b holds it, so that it is to be delivered.
[[gnu::always_inline]] inline bool accepted(rd_iface *iface, rx_conn *c, const parsed_pkt &p,
                                            const iface::buffer *b)
{
    rel::receiver::verdict v = c->rx.on_data(p.hdr.psn, clock_now(iface), p.ack_req);
    owe_link(iface, c);
    if (v == rel::receiver::verdict::duplicate) {
        ++iface->dup_rx;
        return false;
    }
    if ((v == rel::receiver::verdict::gap) || (b == nullptr)) {
        ++iface->gap_rx;
        return false;
    }
    return true;
}

/// deliver_data() once it knows whether the receive path is at its limit
/// (Slow: refused, or deferred by the async side); the fast one tests
/// nothing of either.
template <bool Slow>
inline bool deliver(rd_iface *iface, rx_conn *c, const parsed_pkt &p, iface::buffer *b)
{
    const rd_hdr &hdr = p.hdr;
    if (Slow && refused(iface, c, p, b)) {
        return false;
    }
    if (!accepted(iface, c, p, b)) {
        return false;
    }
    if (Slow && iface->as.active) {
        // (accepted: async_defer_am() has room, checked by refused())
        return async_defer_am(iface, hdr.am_id, b, static_cast<unsigned>(p.body_len));
    }
    return deliver_am(iface, hdr.am_id, b, static_cast<unsigned>(p.body_len));
}

[[gnu::noinline]] bool deliver_slow(rd_iface *iface, rx_conn *c, const parsed_pkt &p,
                                    iface::buffer *b)
{
    return deliver<true>(iface, c, p, b);
}

} // namespace

bool deliver_data(rd_iface *iface, rx_conn *c, const parsed_pkt &p, iface::buffer *b)
{
    if (__builtin_expect(iface->rx_held >= iface->rx_hold_limit, 0)) {
        return deliver_slow(iface, c, p, b);
    }
    return deliver<false>(iface, c, p, b);
}

void deliver_in_place(rd_iface *iface, rx_conn *c, const parsed_pkt &p, const iface::buffer *b)
{
    // Never refused: what holds UCP's receive buffers does not hold it.
    (void)accepted(iface, c, p, b);
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
