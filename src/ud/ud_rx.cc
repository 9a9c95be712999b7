// SPDX-License-Identifier: BSD-3-Clause
// ud_zv receive path: validation and dispatch of every datagram, receive
// connections (CREQ), disconnection (DISC), liveness (PROBE, ALIVE).
#include "ud/ud_iface.h"

#include "iface/conn.h" // grh_source_matches

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <cstring>

namespace zv::ud {

rx_conn *conn_new(ud_iface *iface, const iface::device_addr &dev, uint32_t src_qp,
                  uint32_t peer_ep, rel::psn_t first_psn)
{
    rd_iface *rd = &iface->super;
    auto peer    = std::make_pair(iface::gid_key(dev), src_qp);
    auto pit     = iface->conns_per_peer.find(peer);
    const unsigned limit = rd->super.settings.max_peer_conns;
    if ((pit != iface->conns_per_peer.end()) && (pit->second >= limit)) {
        ++rd->refused_conns;
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
        ++rd->bad_rx;
        return nullptr;
    }
    // Its entries first (the id is filled in below): out of memory leaves
    // nothing behind and drops the packet, which the peer sends again.
    const auto key = std::make_tuple(iface::gid_key(dev), src_qp, peer_ep);
    bool keyed     = false;
    if (util::try_alloc([&] {
            keyed = iface->conn_by_key.try_emplace(key, 0).second;
            iface->conns_per_peer.try_emplace(peer, 0);
        }) != UCS_OK) {
        if (keyed) {
            iface->conn_by_key.erase(key);
        }
        ++rd->bad_rx;
        return nullptr;
    }
    rx_conn *c = conn_alloc(rd, first_psn);
    if (c == nullptr) {
        if (keyed) {
            iface->conn_by_key.erase(key);
        }
        pit = iface->conns_per_peer.find(peer);
        if (pit->second == 0) {
            iface->conns_per_peer.erase(pit);
        }
        ++rd->bad_rx;
        return nullptr;
    }
    iface->graves.erase(c->id); // (an id given out again: its old grave is stale)
    ++iface->conns_per_peer.find(peer)->second;
    c->peer_ep  = peer_ep;
    c->peer_qpn = src_qp;
    c->peer     = dev;
    c->qp       = iface->qp.get();
    c->ah       = ah;
    if (keyed) {
        iface->conn_by_key.find(key)->second = c->id; // (an older entry stays, as before)
    }
    find_partner(rd, c);
    ucs_debug("ud_zv: receive connection 0x%x for endpoint 0x%x of qp 0x%x", c->id, peer_ep,
              src_qp);
    return c;
}

namespace {

rx_conn *conn_lookup(rd_iface *rd, uint32_t id, uint32_t src_qp)
{
    rx_conn *c = rd->conns.find(id);
    return ((c != nullptr) && (c->peer_qpn == src_qp)) ? c : nullptr;
}

/// A CREQ: find or create the receive connection, answer with CREP. 'grh'
/// is the packet's GRH area (valid when grh_valid): a CREQ is taken only
/// from the GID it names, since the CREP goes there.
void handle_creq(ud_iface *iface, const rd_hdr &hdr, uint32_t src_qp, const char *body,
                 const char *grh, bool grh_valid)
{
    rd_iface *rd = &iface->super;
    creq_body b;
    if (hdr.psn != 0) {
        ++rd->bad_rx;
        return;
    }
    std::memcpy(&b, body, sizeof(b));
    if (grh_valid && !iface::grh_source_matches(grh, b.dev.gid)) {
        ++rd->spoofed_rx;
        return;
    }
    const uint32_t peer_ep = b.ep_id;
    auto key = std::make_tuple(iface::gid_key(b.dev), src_qp, peer_ep);
    rx_conn *c;
    auto it = iface->conn_by_key.find(key);
    if (it != iface->conn_by_key.end()) {
        c = rd->conns.find(it->second);
    } else {
        c = conn_new(iface, b.dev, src_qp, peer_ep, 0);
        if (c == nullptr) {
            return; // counted and logged; the peer's endpoint retries or times out
        }
    }
    (void)c->rx.on_data(hdr.psn, clock_now(rd));
    crep_body r{c->id};
    if (send_to_ep(rd, c, rd_hdr::crep, &r, sizeof(r)) == UCS_OK) {
        c->rx.acked();
    }
    // Otherwise the CREQ comes again and is answered then.
}

/// A DISC or an ALIVE from the endpoint of connection hdr.dest.
void handle_from_ep(ud_iface *iface, const rd_hdr &hdr, uint32_t src_qp, const char *body)
{
    rd_iface *rd = &iface->super;
    rx_conn *c   = conn_lookup(rd, hdr.dest, src_qp);
    disc_body d;
    std::memcpy(&d, body, sizeof(d));
    if ((hdr.type == rd_hdr::disc) && (c == nullptr) &&
        forget(iface, hdr.dest, src_qp, d.ep_id)) {
        return; // the endpoint of a reclaimed connection is gone too
    }
    if ((c == nullptr) || (d.ep_id != c->peer_ep)) {
        ++rd->bad_rx;
        return;
    }
    if (hdr.type == rd_hdr::disc) {
        conn_free(rd, c);
    } else {
        c->heard = true;
    }
}

} // namespace

bool rx_packet(rd_iface *rd, const char *pkt, const ibv_wc &wc, iface::buffer *b)
{
    ud_iface *iface = to_ud(rd);
    parsed_pkt p;
    if (__builtin_expect(!parse_packet(pkt, wc.byte_len, &p), 0)) {
        ++rd->bad_rx;
        return false;
    }
    const rd_hdr &hdr     = p.hdr;
    const uint32_t src_qp = wc.src_qp;
    switch (hdr.type) {
    case rd_hdr::data: {
        rx_conn *c = conn_lookup(rd, hdr.dest, src_qp);
        if (__builtin_expect(c == nullptr, 0) &&
            ((c = revive(iface, hdr.dest, src_qp)) == nullptr)) {
            ++rd->bad_rx;
            return false;
        }
        if (hdr.ack_dest != 0) {
            handle_ep_packet(rd, hdr, src_qp, 0);
        }
        return deliver_data(rd, c, p, b);
    }
    case rd_hdr::creq:
        handle_creq(iface, hdr, src_qp, p.body, pkt, (wc.wc_flags & IBV_WC_GRH) != 0);
        return false;
    case rd_hdr::disc:
    case rd_hdr::alive:
        handle_from_ep(iface, hdr, src_qp, p.body);
        return false;
    case rd_hdr::probe:
        answer_probe(iface, hdr, src_qp, p.body);
        return false;
    case rd_hdr::ack_req: {
        rx_conn *c = conn_lookup(rd, hdr.dest, src_qp);
        if (c == nullptr) {
            ++rd->bad_rx;
            return false;
        }
        ack_requested(rd, c);
        return false;
    }
    case rd_hdr::ack:
    case rd_hdr::nak:
        handle_ep_packet(rd, hdr, src_qp, 0);
        return false;
    case rd_hdr::crep:
    case rd_hdr::rebind: {
        crep_body r; // parse_packet() checked the length
        std::memcpy(&r, p.body, sizeof(r));
        handle_ep_packet(rd, hdr, src_qp, r.conn_id);
        return false;
    }
    default:
        ++rd->bad_rx;
        return false;
    }
}

} // namespace zv::ud
