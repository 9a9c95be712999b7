// SPDX-License-Identifier: BSD-3-Clause
// ud_zv: receive connections whose endpoint vanished are found and freed.
#include "ud/ud_ep.h"

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
 * What this costs a peer that only does not progress: its connections
 * here are answered for by its progress, so one that neither sends here nor
 * progresses for two peer timeouts loses its receive connection, and its
 * next send fails at its own peer timeout. A peer that does not progress
 * for one peer timeout while this side sends to it already fails that way
 * today, on both sides (the README's "known limit").
 */

namespace {

constexpr unsigned scans_per_timeout = 4;

void send_probe(ud_iface *iface, const rx_conn *c)
{
    ud_hdr h  = {};
    h.dest    = c->peer_ep;
    h.type    = ud_hdr::probe;
    h.magic   = ud_hdr::magic_value;
    probe_body b{c->id};
    iface->probed += (send_ctl(iface, iface->qp, c->ah, c->peer_qpn, h, &b, sizeof(b)) ==
                      UCS_OK);
    // (A full send queue or a lost packet: the next scan probes again.)
}

} // namespace

void scan_conns(ud_iface *iface, ucs_time_t now)
{
    if (now < iface->next_scan) {
        return;
    }
    iface->next_scan = now + iface->settings.rel.peer_timeout / scans_per_timeout;
    std::vector<rx_conn *> gone;
    for (rx_conn *c : iface->conns.slots()) {
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
            gone.push_back(c);
        } else if (c->quiet >= scans_per_timeout) {
            send_probe(iface, c);
        }
    }
    for (rx_conn *c : gone) {
        ++iface->reclaimed;
        ucs_debug("ud_zv: receive connection 0x%x: endpoint 0x%x of qp 0x%x answered no "
                  "probe within the peer timeout: freed", c->id, c->peer_ep, c->peer_qpn);
        conn_free(iface, c);
    }
}

void answer_probe(ud_iface *iface, const ud_hdr &hdr, uint32_t src_qp, const char *body)
{
    probe_body b; // parse_packet() checked the length
    std::memcpy(&b, body, sizeof(b));
    ud_ep *ep = iface->eps.find(hdr.dest);
    if ((ep == nullptr) || (ep->peer_qpn != src_qp) || (ep->st != ud_ep::state::connected) ||
        (ep->peer_conn != b.conn_id)) {
        return; // no such endpoint (any more): the asker frees its connection
    }
    ud_hdr h = {};
    h.dest   = b.conn_id;
    h.type   = ud_hdr::alive;
    h.magic  = ud_hdr::magic_value;
    disc_body d{ep->id};
    (void)send_ctl(iface, iface->qp, ep->ah, ep->peer_qpn, h, &d, sizeof(d));
}

} // namespace zv::ud
