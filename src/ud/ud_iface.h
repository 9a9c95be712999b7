// SPDX-License-Identifier: BSD-3-Clause
// ud_zv: the reliable-datagram core (src/rd) over one UD QP per interface.
#ifndef ZV_UD_UD_IFACE_H
#define ZV_UD_UD_IFACE_H

#include "rd/rd_ep.h"
#include "ud/ud_wire.h"

#include <list>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace zv::ud {

using namespace zv::rd; // ud_zv is the core's packets on a datagram QP

/*
 * One UD QP per interface; its number is the interface address. Packets are
 * datagrams to (address handle, QP number): an endpoint's go to its peer's
 * UD QP, a receive connection's acks to the QP of the endpoint that sends.
 * A connection is set up in band: the endpoint's CREQ (psn 0 of its
 * stream, so retried, deduplicated and timed out like data) creates the
 * receive connection at the peer, whose CREP gives the endpoint its id.
 * The source QP of every packet must be its object's peer, and a CREQ is
 * taken only from the GID it names (the GRH), since the CREP goes there.
 *
 * A receive connection whose endpoint vanished (its process killed, its
 * DISC lost) is reclaimed (ud_reclaim.cc): after a peer timeout with
 * nothing from the endpoint, PROBEs ask it whether it still exists; a live
 * one answers ALIVE. With no answer within another peer timeout the
 * connection is freed, and a grave keeps what brings it back if the
 * endpoint was only silent.
 *
 * When a send fails locally (Soft-RoCE while the link is down) the QP is in
 * the error state: nothing is posted until every work request has flushed;
 * then it is reset, keeping its number, and the reliability protocol
 * resends what was lost.
 */

constexpr uint32_t qkey    = 0x1ee7a330; ///< of every ud_zv QP
static_assert(grh_len <= max_rx_offset, "the core's room for a transport header");

/// What is kept of a reclaimed receive connection, so that an endpoint that
/// was only silent finds its stream where it left it (ud_reclaim.cc).
struct grave {
    iface::device_addr peer     = {};
    uint32_t           peer_qpn = 0;
    uint32_t           peer_ep  = 0;
    uint16_t           last_psn = 0; ///< last psn delivered
    uint32_t           now_id   = 0; ///< the connection it came back as (0: none)
};

struct ud_iface {
    rd_iface                 super;
    verbs::qp                qp;
    /// The QP entered the error state: see above.
    bool                     qp_broken = false;
    ucs_time_t               flush_kicked = 0; ///< verbs::flush_receives()
    /// (peer gid, peer QP, peer endpoint id) -> receive connection id.
    std::map<std::tuple<iface::gid_key_t, uint32_t, uint32_t>, uint32_t> conn_by_key;
    std::map<iface::port_key_t, verbs::ah> ahs; ///< by peer (gid, lid)
    /// (peer gid, peer QP) -> its receive connections here, at most
    /// settings.common.max_peer_conns (UCX_UD_ZV_MAX_PEER_CONNS).
    std::map<std::pair<iface::gid_key_t, uint32_t>, unsigned> conns_per_peer;
    bool                     warned_peer_limit = false;
    ucs_time_t               next_scan = 0; ///< of receive connections
    uint64_t                 probed    = 0; ///< PROBEs sent
    uint64_t                 revived   = 0; ///< reclaimed connections whose endpoint came back
    /// Reclaimed receive connections by id, the oldest dropped beyond
    /// max_graves (ud_reclaim.cc).
    std::unordered_map<uint32_t, grave> graves;
    /// (A list: unlike a deque, an empty one allocates nothing, and the
    /// interface is built before anything can fail cleanly.)
    std::list<uint32_t>      grave_order;
};

inline ud_iface *to_ud(rd_iface *iface) { return reinterpret_cast<ud_iface *>(iface); }
inline const ud_iface *to_ud(const rd_iface *iface)
{
    return reinterpret_cast<const ud_iface *>(iface);
}
inline ud_iface *to_ud(uct_iface_h iface) { return reinterpret_cast<ud_iface *>(iface); }

[[nodiscard]] ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const rd_settings &settings, uct_iface_h *iface_p);

// Shared between the ud_*.cc files.
ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
void ep_destroy(uct_ep_h ep);
/// One received datagram (tenant::rx).
bool rx_packet(rd_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b);

/// ud_zv as the core's tenant: its progress is compiled for it
/// (rd_progress_inl.h), and a received packet goes straight to rx_packet().
struct tenant {
    static bool rx(rd_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b)
    {
        return rx_packet(iface, pkt, wc, b);
    }
    static constexpr size_t max_body = wire::max_body;
};
ucs_status_t ah_for(ud_iface *iface, const iface::device_addr &peer, ibv_ah **ah_p);
/// A new receive connection for endpoint peer_ep of the peer interface
/// (dev, src_qp), expecting first_psn; null when refused (counted, logged).
rx_conn *conn_new(ud_iface *iface, const iface::device_addr &dev, uint32_t src_qp,
                  uint32_t peer_ep, rel::psn_t first_psn);
/// Probe receive connections that heard nothing for a peer timeout, free
/// those whose endpoint did not answer for another (ud_reclaim.cc). It
/// reads the clock (out of line: the progress that calls it needs no frame
/// for the clock read).
void scan_conns(ud_iface *iface);
/// Data for connection id, which is not there: if it was reclaimed, bring it
/// back where it was and tell its endpoint (REBIND); else null.
rx_conn *revive(ud_iface *iface, uint32_t id, uint32_t src_qp);
/// A DISC for connection id, which is not there: true if it was reclaimed
/// (what was kept of it, and what it came back as, are dropped).
bool forget(ud_iface *iface, uint32_t id, uint32_t src_qp, uint32_t peer_ep);
/// A PROBE for endpoint hdr.dest from src_qp: answer ALIVE if it is there.
void answer_probe(ud_iface *iface, const rd_hdr &hdr, uint32_t src_qp, const char *body);

} // namespace zv::ud

#endif
