// SPDX-License-Identifier: BSD-3-Clause
// ud_zv and uc_zv receive path: validation and dispatch of every packet,
// receive connections (CREQ), delivery to UCP, owed acknowledgements.
#include "ud/ud_ep.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace zv::ud {

namespace {

constexpr unsigned rx_poll_batch = 16;

/// Where UCP's data starts in a receive buffer.
inline char *am_data(const ud_iface *iface, iface::buffer *b)
{
    return b->data() + iface->rx_offset + sizeof(ud_hdr);
}

} // namespace

void release_rx(uct_recv_desc_t *self, void *desc)
{
    ud_iface *iface = static_cast<ud_iface *>(
            reinterpret_cast<iface::release_desc *>(self)->owner);
    char *data = static_cast<char *>(desc) + iface->rx_headroom;
    iface::buffer_pool::put(iface->rx_pool.from_data(data - iface->rx_offset - sizeof(ud_hdr)));
}

rx_conn *conn_new(ud_iface *iface, const iface::device_addr &dev, uint32_t src_qp,
                  uint32_t peer_ep, rel::psn_t first_psn)
{
    if (iface->conns.full()) {
        ++iface->bad_rx;
        return nullptr;
    }
    auto peer = std::make_pair(gid_key(dev), src_qp);
    auto pit  = iface->conns_per_peer.find(peer);
    const unsigned limit = iface->super.settings.max_peer_conns;
    if ((pit != iface->conns_per_peer.end()) && (pit->second >= limit)) {
        ++iface->refused_conns;
        if (!iface->warned_peer_limit) {
            iface->warned_peer_limit = true;
            ucs_warn("ud_zv: peer interface (qp 0x%x) asks for more than "
                     "UCX_UD_ZV_MAX_PEER_CONNS=%u connections: refusing it (said once)",
                     src_qp, limit);
        }
        return nullptr;
    }
    ibv_ah *ah;
    if (ah_for(iface, dev, &ah) != UCS_OK) {
        ++iface->bad_rx;
        return nullptr;
    }
    auto *c = new (std::nothrow) rx_conn{};
    if (c == nullptr) {
        return nullptr;
    }
    c->id       = iface->conns.add(c);
    iface->graves.erase(c->id); // (an id given out again: its old grave is stale)
    ++iface->conns_per_peer[peer];
    c->peer_ep  = peer_ep;
    c->peer_qpn = src_qp;
    c->peer     = dev;
    c->ah       = ah;
    c->rx.init(&iface->settings.rel, first_psn);
    iface->conn_by_key.emplace(std::make_tuple(gid_key(dev), src_qp, peer_ep), c->id);
    for (ud_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->partner == nullptr) && (ep->peer_qpn == src_qp) &&
            (std::memcmp(ep->peer.gid, dev.gid, sizeof(dev.gid)) == 0)) {
            ep->partner = c;
            c->partner  = ep;
            break;
        }
    }
    ucs_debug("ud_zv: receive connection 0x%x for endpoint 0x%x of qp 0x%x", c->id, peer_ep,
              src_qp);
    return c;
}

namespace {

rx_conn *conn_lookup(ud_iface *iface, uint32_t id, uint32_t src_qp)
{
    rx_conn *c = iface->conns.find(id);
    return ((c != nullptr) && (c->peer_qpn == src_qp)) ? c : nullptr;
}

/// A CREQ: find or create the receive connection, answer with CREP. 'grh'
/// is the packet's GRH area (valid when grh_valid): a CREQ is taken only
/// from the GID it names, since the CREP goes there.
void handle_creq(ud_iface *iface, const ud_hdr &hdr, uint32_t src_qp,
                 const char *body, size_t body_len, const char *grh, bool grh_valid)
{
    creq_body b;
    if (hdr.psn != 0) {
        ++iface->bad_rx;
        return;
    }
    std::memcpy(&b, body, sizeof(b));
    if (grh_valid && !iface::grh_source_matches(grh, b.dev.gid)) {
        ++iface->spoofed_rx;
        return;
    }
    const uint32_t peer_ep = b.ep_id;
    auto key = std::make_tuple(gid_key(b.dev), src_qp, peer_ep);
    rx_conn *c;
    auto it = iface->conn_by_key.find(key);
    if (it != iface->conn_by_key.end()) {
        c = iface->conns.find(it->second);
    } else {
        c = conn_new(iface, b.dev, src_qp, peer_ep, 0);
        if (c == nullptr) {
            return; // counted and logged; the peer's endpoint retries or times out
        }
    }
    (void)c->rx.on_data(hdr.psn, ucs_get_time());
    crep_body r{c->id};
    if (send_to_ep(iface, c, ud_hdr::crep, &r, sizeof(r)) == UCS_OK) {
        c->rx.acked();
    }
    // Otherwise the CREQ comes again and is answered then.
}

/// One received packet; 'b' is null for an injected duplicate (a copy of
/// the header). Returns true when UCP kept the buffer.
bool handle_packet(ud_iface *iface, const char *pkt, size_t len, uint32_t src_qp,
                   bool grh_valid, iface::buffer *b)
{
    parsed_pkt p;
    if (__builtin_expect(!parse_packet(pkt, len, &p), 0)) {
        ++iface->bad_rx;
        return false;
    }
    const ud_hdr &hdr = p.hdr;
    const char *body  = p.body;
    size_t body_len   = p.body_len;
    switch (hdr.type) {
    case ud_hdr::data: {
        rx_conn *c = conn_lookup(iface, hdr.dest, src_qp);
        if (__builtin_expect(c == nullptr, 0) &&
            ((c = revive(iface, hdr.dest, src_qp)) == nullptr)) {
            ++iface->bad_rx;
            return false;
        }
        if (hdr.ack_dest != 0) {
            handle_ep_packet(iface, hdr, src_qp, nullptr, 0);
        }
        return deliver_data(iface, c, hdr, body, body_len, b, true);
    }
    case ud_hdr::creq:
        handle_creq(iface, hdr, src_qp, body, body_len, pkt, grh_valid);
        return false;
    case ud_hdr::disc: {
        rx_conn *c = conn_lookup(iface, hdr.dest, src_qp);
        disc_body d;
        std::memcpy(&d, body, sizeof(d));
        if ((c == nullptr) && forget(iface, hdr.dest, src_qp, d.ep_id)) {
            return false; // the endpoint of a reclaimed connection is gone too
        }
        if (c == nullptr) {
            ++iface->bad_rx;
            return false;
        }
        if (d.ep_id != c->peer_ep) {
            ++iface->bad_rx;
            return false;
        }
        conn_free(iface, c);
        return false;
    }
    case ud_hdr::alive: {
        rx_conn *c = conn_lookup(iface, hdr.dest, src_qp);
        disc_body d;
        std::memcpy(&d, body, sizeof(d));
        if ((c == nullptr) || (d.ep_id != c->peer_ep)) {
            ++iface->bad_rx;
            return false;
        }
        c->heard = true;
        return false;
    }
    case ud_hdr::probe:
        answer_probe(iface, hdr, src_qp, body);
        return false;
    case ud_hdr::ack:
    case ud_hdr::nak:
    case ud_hdr::crep:
    case ud_hdr::rebind:
        handle_ep_packet(iface, hdr, src_qp, body, body_len);
        return false;
    default:
        ++iface->bad_rx;
        return false;
    }
}

/// One received packet of either kind of interface; consumes 'b' (null for
/// an injected duplicate, which only reaches the reliability checks).
void dispatch(ud_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b)
{
    bool kept = iface->uc ? uc_handle(iface, pkt, wc, b) :
                            handle_packet(iface, pkt, wc.byte_len, wc.src_qp,
                                          (wc.wc_flags & IBV_WC_GRH) != 0, b);
    if (!kept && (b != nullptr)) {
        iface::buffer_pool::put(b);
    }
}

/// A completed receive: through the fault injector when it is on.
void receive_one(ud_iface *iface, iface::buffer *b, const ibv_wc &wc)
{
    if (iface->fault.on()) {
        switch (iface->fault.next()) {
        case iface::fault_injector::action::drop:
            iface::buffer_pool::put(b);
            return;
        case iface::fault_injector::action::dup: {
            char copy[grh_len + sizeof(ud_hdr) + sizeof(creq_body)];
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
void send_acks(ud_iface *iface, ucs_time_t now)
{
    for (rx_conn **p = &iface->owe_conns; *p != nullptr;) {
        rx_conn *c = *p;
        if (!c->rx.owes()) {
            *p        = c->owe_next;
            c->on_owe = false;
            continue;
        }
        bool nak = c->rx.nak_due();
        if (nak || c->rx.ack_due(now)) {
            if (send_to_ep(iface, c, nak ? ud_hdr::nak : ud_hdr::ack, nullptr, 0) != UCS_OK) {
                return; // send queue full: next time
            }
            c->rx.acked();
            *p        = c->owe_next;
            c->on_owe = false;
            continue;
        }
        p = &c->owe_next;
    }
}

unsigned poll_rx(ud_iface *iface)
{
    ibv_wc wc[rx_poll_batch];
    int n = ibv_poll_cq(iface->recv_cq, rx_poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        auto *b = reinterpret_cast<iface::buffer *>(wc[i].wr_id);
        --iface->rx_posted;
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) {
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_debug("qp 0x%x: receive completion error: %s", wc[i].qp_num,
                          ibv_wc_status_str(wc[i].status));
            }
            iface::buffer_pool::put(b);
            note_qp_error(iface, wc[i]);
            continue;
        }
        receive_one(iface, b, wc[i]);
    }
    if ((n <= 0) && (iface->held_buf != nullptr)) {
        // Nothing came after the held packet: let it through now.
        iface::buffer *h = iface->held_buf;
        iface->held_buf  = nullptr;
        dispatch(iface, h->data(), iface->held_wc, h);
    }
    if (iface->owe_conns != nullptr) {
        send_acks(iface, ucs_get_time());
    }
    unsigned missing = iface->super.settings.rx_queue_len - iface->rx_posted;
    if (missing >= iface->settings.rx_batch) {
        post_rx(iface, missing);
    }
    return static_cast<unsigned>(n > 0 ? n : 0);
}

bool deliver_data(ud_iface *iface, rx_conn *c, const ud_hdr &hdr, const char *,
                  size_t body_len, iface::buffer *b, bool am)
{
    rel::receiver::verdict v = c->rx.on_data(hdr.psn, ucs_get_time());
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
    ucs_status_t status = uct_iface_invoke_am(&iface->super.super, hdr.am_id,
                                              am_data(iface, b),
                                              static_cast<unsigned>(body_len),
                                              UCT_CB_PARAM_FLAG_DESC);
    if (status == UCS_OK) {
        return false;
    }
    // UCP keeps the data and releases it through release_rx().
    char *desc = am_data(iface, b) - iface->rx_headroom;
    *reinterpret_cast<uct_recv_desc_t **>(desc - sizeof(uct_recv_desc_t *)) =
            &iface->release_desc.super;
    return true;
}

void owe_link(ud_iface *iface, rx_conn *c)
{
    if (!c->on_owe) {
        c->on_owe        = true;
        c->owe_next      = iface->owe_conns;
        iface->owe_conns = c;
    }
}

} // namespace zv::ud
