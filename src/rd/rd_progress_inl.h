// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram core's progress, compiled into each transport's
// progress function for its tenant: the receive path calls what a packet
// is for directly, not through a pointer.
#ifndef ZV_RD_RD_PROGRESS_INL_H
#define ZV_RD_RD_PROGRESS_INL_H

#include "rd/rd_ep.h"

#include <algorithm>
#include <cstring>

namespace zv::rd {

/*
 * A tenant is the transport the core's progress is compiled for (ud_zv's
 * ud::tenant, uc_zv's uc::tenant), a type with
 *   static bool rx(rd_iface *iface, const char *pkt, const ibv_wc &wc,
 *                  iface::buffer *b);
 *       one received packet, 'pkt' its start in the receive buffer; 'b'
 *       null for an injected duplicate; true when UCP kept b;
 *   static constexpr size_t max_body;
 *       the largest control-packet body it carries (an injected duplicate
 *       keeps that much of a packet).
 * UCP's call of the transport's progress is then the receive path's one
 * indirect call.
 */

constexpr unsigned rx_poll_batch = 16;

/// A receive completed with an error: its buffer goes back, the transport
/// hears of it (rd_transport::wc_error). Out of line.
void rx_failed(rd_iface *iface, iface::buffer *b, const ibv_wc &wc);

/// One received packet; consumes 'b' (null for an injected duplicate,
/// which only reaches the reliability checks).
template <class Tenant>
[[gnu::always_inline]] inline void dispatch(rd_iface *iface, const char *pkt, const ibv_wc &wc,
                                            iface::buffer *b)
{
    if (!Tenant::rx(iface, pkt, wc, b) && (b != nullptr)) {
        iface::buffer_pool::put(b);
    }
}

/// A completed receive, through the fault injector.
template <class Tenant>
[[gnu::noinline]] void receive_faulty(rd_iface *iface, iface::buffer *b, const ibv_wc &wc)
{
    switch (iface->fault.next()) {
    case iface::fault_injector::action::drop:
        iface::buffer_pool::put(b);
        return;
    case iface::fault_injector::action::dup: {
        char copy[max_rx_offset + sizeof(rd_hdr) + Tenant::max_body];
        ibv_wc wc_copy   = wc;
        wc_copy.byte_len = static_cast<uint32_t>(std::min<size_t>(wc.byte_len,
                                                                  sizeof(copy)));
        std::memcpy(copy, b->data(), wc_copy.byte_len);
        dispatch<Tenant>(iface, b->data(), wc, b);
        dispatch<Tenant>(iface, copy, wc_copy, nullptr);
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
    dispatch<Tenant>(iface, b->data(), wc, b);
    if (iface->held_buf != nullptr) {
        // The held packet arrives after this one: reordered.
        iface::buffer *h = iface->held_buf;
        iface->held_buf  = nullptr;
        dispatch<Tenant>(iface, h->data(), iface->held_wc, h);
    }
}

/// Poll the receive CQ: handle what arrived (Tenant::rx), through the fault
/// injector when 'Faults', send due acks, repost.
template <class Tenant, bool Faults>
[[gnu::always_inline]] inline unsigned poll_rx(rd_iface *iface)
{
    ibv_wc wc[rx_poll_batch];
    int n = ibv_poll_cq(iface->recv_cq.get(), rx_poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        auto *b = reinterpret_cast<iface::buffer *>(wc[i].wr_id);
        iface->rx_ring.consumed();
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) {
            rx_failed(iface, b, wc[i]);
            continue;
        }
        if (Faults) {
            receive_faulty<Tenant>(iface, b, wc[i]);
        } else {
            dispatch<Tenant>(iface, b->data(), wc[i], b);
        }
    }
    if (Faults && (n <= 0) && (iface->held_buf != nullptr)) {
        // Nothing came after the held packet: let it through now.
        iface::buffer *h = iface->held_buf;
        iface->held_buf  = nullptr;
        dispatch<Tenant>(iface, h->data(), iface->held_wc, h);
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

/// What every progress does first: receives, send completions, timers,
/// queued requests. Frees are deferred until progress_end(). 'Faults':
/// fault injection is on (rd_iface::fault); the variant is chosen when the
/// interface opens, so that the receive path without it does not look.
template <class Tenant, bool Faults> unsigned progress_begin(rd_iface *iface)
{
    ++iface->in_progress; // (progress_end() takes it back)
    iface->now_valid   = false;
    const unsigned call = iface->progress_count.load(std::memory_order_relaxed) + 1;
    iface->progress_count.store(call, std::memory_order_relaxed);
    unsigned count      = 0;
    if (__builtin_expect(async_waiting(iface), 0) && !iface->as.active) {
        count += async_hand_over(iface); // first: it arrived first
    }
    count += poll_rx<Tenant, Faults>(iface);
    // (An acknowledged packet's buffer is released by the later of its ack
    // and its send completion.)
    if (iface::poll_tx_now(count, call, iface->tx_outstanding, iface->tx_limit)) {
        count += poll_tx(iface);
    }
    // The timers are coarse (their tick is half of ACK_DELAY or RTO): they
    // are looked at when this call has read the clock anyway, and every
    // 16th call. An idle call reads no clock: where UCX does not trust the
    // TSC (a VM without an invariant one) a clock read is gettimeofday(),
    // a system call, and a spin on it stretches every round trip.
    if (((iface->busy_eps != nullptr) || (iface->owe_conns != nullptr)) &&
        (iface->now_valid || ((call & 15) == 0))) {
        ucs_time_t now = clock_now(iface);
        if (now >= iface->next_timer) {
            iface->next_timer = now + iface->timer_tick;
            count += check_timers(iface, now);
        }
    }
    if ((iface->pending_eps != nullptr) && !iface->as.active) {
        dispatch_pending(iface);
    }
    return count;
}

} // namespace zv::rd

#endif
