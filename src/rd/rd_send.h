// SPDX-License-Identifier: BSD-3-Clause
// The send path's inline helpers, for rd_ep.cc (active messages) and
// uc_put.cc (uc_zv's puts).
#ifndef ZV_RD_RD_SEND_H
#define ZV_RD_RD_SEND_H

#include "rd/rd_ep.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace zv::rd {

/// Room for one more packet, and no pending request to overtake (the async
/// side may free the window while the worker computes: the requests go
/// first). A connecting endpoint has room too: what it sends waits in its
/// window until the connection exists (send_desc).
inline ucs_status_t check_tx(rd_ep *ep)
{
    rd_iface *iface = ep->iface;
    if (__builtin_expect(ep->st == rd_ep::state::failed, 0)) {
        return ep->error;
    }
    if (__builtin_expect(ep->tx.window_full() || (ep->resend_next != nullptr) ||
                         (iface->tx_outstanding >= iface->tx_limit) || ep->pending.blocks(),
                         0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/// A send descriptor with room for 'payload' bytes after the header.
inline tx_desc *desc_get(rd_ep *ep, uint8_t type, size_t payload)
{
    iface::buffer *b = (payload <= small_payload) ? ep->iface->tx_small_pool.get() :
                                                    ep->iface->tx_pool.get();
    if (__builtin_expect(b == nullptr, 0)) {
        ep->iface->tx_starved = true;
        return nullptr;
    }
    auto *d      = reinterpret_cast<tx_desc *>(b->data());
    d->ep        = ep;
    d->comp      = nullptr;
    d->buf       = b;
    d->silent_seq = 0;
    d->status    = UCS_OK;
    d->in_flight = 0;
    d->acked     = false;
    d->num_sge   = 1;
    d->opcode    = IBV_WR_SEND;
    d->imm_data  = 0;
    d->target    = ep->target;
    rd_hdr *h    = d->hdr();
    h->dest      = ep->peer_conn;
    h->ack_dest  = 0;
    h->ack_psn   = 0;
    h->type      = type;
    h->am_id     = 0;
    h->magic     = rd_hdr::magic_value;
    return d;
}

/// An active message's short payload into its descriptor, inline for the
/// few bytes am_short usually carries (a call to memcpy costs more than
/// such a copy).
inline void copy_short(char *dst, const void *src, size_t n)
{
    const auto *s = static_cast<const char *>(src);
    if (__builtin_expect(n > 16, 0)) {
        std::memcpy(dst, s, n);
    } else if (n >= 8) { // two overlapping words
        uint64_t a, b;
        std::memcpy(&a, s, 8);
        std::memcpy(&b, s + n - 8, 8);
        std::memcpy(dst, &a, 8);
        std::memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, s, 4);
        std::memcpy(&b, s + n - 4, 4);
        std::memcpy(dst, &a, 4);
        std::memcpy(dst + n - 4, &b, 4);
    } else if (n > 0) { // 1 to 3 bytes: first, middle, last
        const char first = s[0], middle = s[n / 2], last = s[n - 1];
        dst[0]     = first;
        dst[n / 2] = middle;
        dst[n - 1] = last;
    }
}

/// The partner receive connection's ack rides along, if one is owed.
inline void piggyback(rd_ep *ep, rd_hdr *h)
{
    rx_conn *c = ep->partner;
    // (not on a packet held back for the connection: the ack would wait)
    if ((c != nullptr) && c->rx.owes() && !c->rx.nak_due() &&
        (ep->st == rd_ep::state::connected)) {
        h->ack_dest = c->peer_ep;
        h->ack_psn  = c->rx.ack_psn();
        c->rx.acked();
    }
}

/// Zero-copy: the user's registered memory becomes the packet's next sges.
/// False if an entry has no memory handle.
inline bool add_iov(tx_desc *d, const uct_iov_t *iov, size_t iovcnt)
{
    for (size_t i = 0; i < iovcnt; ++i) {
        size_t n = iov[i].length * std::max<unsigned>(iov[i].count, 1);
        if (n == 0) {
            continue;
        }
        if (iov[i].memh == UCT_MEM_HANDLE_NULL) {
            return false;
        }
        d->sge[d->num_sge++] = {reinterpret_cast<uintptr_t>(iov[i].buffer),
                                static_cast<uint32_t>(n), md::memh_lkey(iov[i].memh)};
    }
    return true;
}

/// Number the packet and keep it for retransmission (send_desc's first
/// half): its header has its psn and, when its ack is awaited, the
/// ack-request flag. Nothing of it changes after.
inline void number_desc(rd_ep *ep, tx_desc *d)
{
    rd_hdr *h = d->hdr();
    if (ep->tx.idle()) {
        busy_link(ep);
    }
    h->psn = ep->tx.push(&d->pkt, clock_now(ep->iface));
    // Someone waits for this packet's ack (its completion, or room in the
    // window): the receiver acknowledges it at once, not after ack_delay.
    if (d->comp != nullptr) {
        h->type |= rd_hdr::flag_ack_req;
        ++ep->comps_unreleased;
    } else if (ep->tx.window_full()) {
        h->type |= rd_hdr::flag_ack_req;
    }
    ++ep->unreleased;
}

/// ud_zv's connection request: the one packet a connecting endpoint posts
/// (what follows it waits for the connection).
inline bool is_creq(tx_desc *d)
{
    return (d->hdr()->type & ~rd_hdr::flag_ack_req) == rd_hdr::creq;
}

/// Post a numbered packet (send_desc's second half). A failed post leaves
/// it in the window: the timer sends it again. A connecting endpoint's
/// packet waits in the window, unposted, for post_held().
inline void post_numbered(rd_ep *ep, tx_desc *d)
{
    if (__builtin_expect(ep->st == rd_ep::state::connected, 1) || is_creq(d)) {
        (void)post_desc(ep->iface, ep, d, true);
    } // else it waits for the connection (post_held)
}

/// A SEND of 'len' bytes after the header: number it, keep it, post it
/// (number_desc(), post_numbered()). A transport that writes what the
/// packet's number decides into the descriptor (an RDMA write whose
/// immediate data carries it) calls the two halves itself.
void send_desc(rd_ep *ep, tx_desc *d, size_t len);

} // namespace zv::rd

#endif
