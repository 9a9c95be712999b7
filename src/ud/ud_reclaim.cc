// SPDX-License-Identifier: BSD-3-Clause
// ud_zv: receive connections whose endpoint vanished are found and freed.
#include "ud/ud_iface.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <vector>

namespace zv::ud {

/*
 * A receive connection lives until its endpoint's DISC arrives. A peer
 * process that is killed sends none, and a DISC can be lost: without more,
 * a long-running process would keep a connection (and an id) for every
 * peer that ever came and went.
 *
 * So the connections are scanned scans_per_timeout times per peer timeout
 * (UCX_UD_ZV_TIMEOUT), every 1024th progress reading the clock to see
 * whether a scan is due. A connection that got no new data since the last
 * scan, and no ALIVE, counts one quiet scan more. From a peer timeout of
 * quiet scans on, each scan sends its endpoint a PROBE. A live endpoint
 * answers ALIVE, which ends the quiet. After two peer timeouts of quiet the
 * connection is freed.
 *
 * A peer that only did not progress (it computed) must not lose anything
 * by this. So what the stream needs is kept of a freed connection, as a
 * grave: the endpoint, and the last psn delivered (about 100 bytes; the
 * oldest max_graves are kept). When data for a buried id arrives from its
 * peer, the connection comes back under a new id, expecting the next psn,
 * and its endpoint is told (REBIND: the new id, and the last psn delivered,
 * which acknowledges everything up to it). The endpoint then sends its
 * window again under the new id: nothing is lost, nothing delivered twice.
 * Until the endpoint uses the new id, each packet for the old one is
 * delivered to the new connection and answered with REBIND again. A peer
 * whose grave was dropped (more than max_graves connections reclaimed
 * since) fails at its own peer timeout.
 */

namespace {

constexpr unsigned scans_per_timeout = 4;
constexpr size_t   max_graves        = 4096;

void send_probe(ud_iface *iface, const rx_conn *c)
{
    probe_body b{c->id};
    iface->probed += (send_to_ep(&iface->super, c, rd_hdr::probe, &b, sizeof(b)) == UCS_OK);
    // (A full send queue or a lost packet: the next scan probes again.)
}

/// Keep what the stream of c needs, then free c. Out of memory, c stays
/// (false): a later scan reclaims it.
bool bury(ud_iface *iface, rx_conn *c)
{
    grave g;
    g.peer     = c->peer;
    g.peer_qpn = c->peer_qpn;
    g.peer_ep  = c->peer_ep;
    g.last_psn = c->rx.ack_psn();
    bool added = false;
    if (util::try_alloc([&] {
            added = iface->graves.insert_or_assign(c->id, g).second;
            iface->grave_order.push_back(c->id);
        }) != UCS_OK) {
        if (added) {
            iface->graves.erase(c->id);
        }
        return false;
    }
    while (iface->grave_order.size() > max_graves) {
        iface->graves.erase(iface->grave_order.front());
        iface->grave_order.pop_front();
    }
    conn_free(&iface->super, c);
    return true;
}

void send_rebind(ud_iface *iface, const rx_conn *c)
{
    crep_body b{c->id};
    (void)send_to_ep(&iface->super, c, rd_hdr::rebind, &b, sizeof(b));
    // (Lost or not sent: the endpoint's next packet for the old id asks again.)
}

} // namespace

void scan_conns(ud_iface *iface)
{
    const ucs_time_t now = ucs_get_time();
    if (now < iface->next_scan) {
        return;
    }
    iface->next_scan = now + iface->super.settings.rel.peer_timeout / scans_per_timeout;
    std::vector<rx_conn *> gone;
    for (rx_conn *c : iface->super.conns.slots()) {
        if (c == nullptr) {
            continue;
        }
        if (c->heard || (c->rx.ack_psn() != c->seen_psn)) {
            c->heard    = false;
            c->quiet    = 0;
            c->seen_psn = c->rx.ack_psn();
            continue;
        }
        if (++c->quiet >= 2 * scans_per_timeout) {
            // (Out of memory: reclaimed by a later scan.)
            (void)util::try_alloc([&] { gone.push_back(c); });
        } else if (c->quiet >= scans_per_timeout) {
            send_probe(iface, c);
        }
    }
    for (rx_conn *c : gone) {
        ucs_debug("ud_zv: receive connection 0x%x: endpoint 0x%x of qp 0x%x answered no "
                  "probe within the peer timeout: freed", c->id, c->peer_ep, c->peer_qpn);
        iface->super.reclaimed += bury(iface, c);
    }
}

rx_conn *revive(ud_iface *iface, uint32_t id, uint32_t src_qp)
{
    auto it = iface->graves.find(id);
    if ((it == iface->graves.end()) || (it->second.peer_qpn != src_qp)) {
        return nullptr;
    }
    const grave g = it->second;
    rx_conn *c    = nullptr;
    if (g.now_id != 0) {
        c = iface->super.conns.find(g.now_id); // back already: the REBIND was lost
        if ((c == nullptr) || (c->peer_qpn != src_qp) || (c->peer_ep != g.peer_ep)) {
            iface->graves.erase(it); // (and reclaimed again since: its own grave holds it)
            return nullptr;
        }
    } else {
        c = conn_new(iface, g.peer, src_qp, g.peer_ep,
                     static_cast<rel::psn_t>(g.last_psn + 1));
        if (c == nullptr) {
            return nullptr;
        }
        // conn_new() dropped the grave if it gave out the same id again.
        auto again = iface->graves.find(id);
        if (again != iface->graves.end()) {
            again->second.now_id = c->id;
        }
        ++iface->revived;
        ucs_debug("ud_zv: receive connection 0x%x of endpoint 0x%x (qp 0x%x) is back as 0x%x",
                  id, g.peer_ep, src_qp, c->id);
    }
    send_rebind(iface, c);
    return c;
}

bool forget(ud_iface *iface, uint32_t id, uint32_t src_qp, uint32_t peer_ep)
{
    auto it = iface->graves.find(id);
    if ((it == iface->graves.end()) || (it->second.peer_qpn != src_qp) ||
        (it->second.peer_ep != peer_ep)) {
        return false;
    }
    rx_conn *c = (it->second.now_id != 0) ? iface->super.conns.find(it->second.now_id) : nullptr;
    if ((c != nullptr) && (c->peer_qpn == src_qp) && (c->peer_ep == peer_ep)) {
        conn_free(&iface->super, c);
    }
    iface->graves.erase(it);
    return true;
}

void answer_probe(ud_iface *iface, const rd_hdr &hdr, uint32_t src_qp, const char *body)
{
    probe_body b; // parse_packet() checked the length
    std::memcpy(&b, body, sizeof(b));
    rd_ep *ep = iface->super.eps.find(hdr.dest);
    if ((ep == nullptr) || (ep->peer_qpn != src_qp) || (ep->st != rd_ep::state::connected) ||
        (ep->peer_conn != b.conn_id)) {
        return; // no such endpoint (any more): the asker frees its connection
    }
    disc_body d{ep->id}; // (to b.conn_id, which is ep->peer_conn)
    (void)send_to_conn(ep, rd_hdr::alive, &d, sizeof(d));
}

} // namespace zv::ud
