// SPDX-License-Identifier: BSD-3-Clause
// ud_zv: Unreliable Datagram transport with software reliability.
#ifndef ZV_UD_UD_IFACE_H
#define ZV_UD_UD_IFACE_H

#include "iface/buffer_pool.h"
#include "iface/conn.h"
#include "iface/fault.h"
#include "iface/zv_iface.h"
#include "ud/rel.h"
#include "verbs/qp.h"

#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace zv::ud {

/*
 * One UD QP per interface; its number is the interface address. A
 * connection is one-directional: an endpoint (ud_ep, what UCT hands to UCP)
 * sends, and a receive connection (rx_conn, created at the peer when the
 * endpoint's CREQ arrives) receives and acknowledges. Every packet starts
 * with ud_hdr; 'dest' names the object it is for at the receiver (DATA,
 * CREQ, DISC: an rx_conn; ACK, NAK, CREP: an ud_ep). The CREQ is the first
 * reliable packet of the connection (psn 0), so the handshake is retried,
 * deduplicated and timed out by the same machinery as data (rel.h). When
 * an endpoint and a receive connection join the same pair of interfaces,
 * they are partners: the receive connection's ack rides in the endpoint's
 * DATA headers (ack_dest/ack_psn) instead of a packet of its own.
 *
 * A receive connection whose endpoint vanished (its process killed, its
 * DISC lost) is reclaimed (ud_reclaim.cc): after a peer timeout with
 * nothing from the endpoint, PROBEs ask it whether it still exists; a live
 * one answers ALIVE. With no answer within another peer timeout the
 * connection is freed.
 *
 * Ids are 32 bits: a table index in the low 20 bits and a generation in the
 * high 12, so a packet for an object that was freed (and its slot reused)
 * is recognised and dropped. Every field of a received header is checked
 * before use; the source QP must be the connection's peer.
 */

/// On-wire header of every ud_zv packet (little-endian hosts).
struct __attribute__((packed)) ud_hdr {
    static constexpr uint16_t magic_value = 0x5a55; // "ZU"
    enum : uint8_t {
        data = 1, ack = 2, nak = 3, creq = 4, crep = 5, disc = 6,
        probe = 7, ///< to an ud_ep: do you still exist? (probe_body)
        alive = 8, ///< the answer, to its rx_conn (disc_body: the endpoint)
        /// to an ud_ep whose receive connection was reclaimed and is back:
        /// it is now crep_body's conn_id; ack_psn: the last psn delivered
        rebind = 9
    };

    uint32_t dest;     ///< id of the receiving object (see above)
    uint32_t ack_dest; ///< DATA: endpoint id a piggybacked ack is for (0: none)
    uint16_t psn;      ///< DATA, CREQ: sequence number
    uint16_t ack_psn;  ///< ACK, NAK, CREP, piggyback: last psn delivered
    uint8_t  type;
    uint8_t  am_id;    ///< DATA
    uint16_t magic;
};

/// CREQ payload: who is asking, and where to answer.
struct __attribute__((packed)) creq_body {
    uint32_t           ep_id;
    iface::device_addr dev;
};

/// CREP payload: the receive connection that now exists for the endpoint.
struct __attribute__((packed)) crep_body {
    uint32_t conn_id;
};

/// DISC payload: the endpoint that is going away.
struct __attribute__((packed)) disc_body {
    uint32_t ep_id;
};

/// PROBE payload: the receive connection that asks.
struct __attribute__((packed)) probe_body {
    uint32_t conn_id;
};

/// Peer interface address: the number of its UD QP.
struct __attribute__((packed)) iface_addr {
    uint8_t qpn[3];
};

/// A received packet whose header passed the checks that need no state.
struct parsed_pkt {
    ud_hdr      hdr;
    const char *body;
    size_t      body_len;
};

/// Validate a received datagram (GRH included): length, magic, known type,
/// AM id, and the body length its type needs. No state is touched; the
/// caller still checks that ids name live objects of the sending QP.
[[nodiscard]] bool parse_packet(const char *pkt, size_t len, parsed_pkt *out);
/// The same for a packet without GRH (uc_zv: SEND on a connected QP).
[[nodiscard]] bool parse_hdr(const char *pkt, size_t len, parsed_pkt *out);

/// uc_zv: immediate data of a put (RDMA WRITE with immediate): a marker
/// bit and the psn; the receive completion is the put's reliable packet.
constexpr uint32_t put_imm_flag = 0x80000000u;
inline uint32_t put_imm(uint16_t psn) { return __builtin_bswap32(put_imm_flag | psn); }
/// The receive side of put_imm: 'host_imm' is ntohl(wc.imm_data). True, with
/// the psn, only for what put_imm produces (the marker bit, no other bits).
[[nodiscard]] inline bool decode_put_imm(uint32_t host_imm, uint16_t *psn)
{
    if ((host_imm & ~(put_imm_flag | 0xffffu)) != 0 || !(host_imm & put_imm_flag)) {
        return false;
    }
    *psn = static_cast<uint16_t>(host_imm);
    return true;
}

/// Payload that fits a small send buffer: short messages, connection
/// requests, zero-copy headers, control packets. Everything else (bcopy)
/// takes a full packet-sized buffer.
constexpr size_t small_payload = 128;

constexpr unsigned max_sge   = 4;  ///< header + up to 3 iov entries
constexpr size_t   grh_len   = 40;
constexpr uint32_t qkey      = 0x1ee7a330; ///< of every ud_zv QP
constexpr uint64_t wr_id_ctl = 1; ///< wr_id low bit: control packet (no descriptor)
constexpr unsigned id_bits   = 20;
constexpr uint32_t id_index_mask = (1u << id_bits) - 1;

/// Objects by 32-bit id: a slot index (low id_bits) and a generation (high
/// bits), so an id of a freed object no longer finds anything after its
/// slot is reused. Id 0 is never given out ("none").
template <class T> class id_table {
public:
    id_table() : m_slots(1, nullptr), m_gen(1, 0) {}

    bool full() const { return m_free.empty() && (m_slots.size() > id_index_mask); }
    /// Objects stored.
    size_t count() const { return m_slots.size() - 1 - m_free.size(); }

    /// Store p; returns its id. The caller checked full().
    uint32_t add(T *p)
    {
        uint32_t idx;
        if (m_free.empty()) {
            idx = static_cast<uint32_t>(m_slots.size());
            m_slots.push_back(p);
            m_gen.push_back(0);
        } else {
            idx = m_free.back();
            m_free.pop_back();
            m_slots[idx] = p;
        }
        return (static_cast<uint32_t>(m_gen[idx]) << id_bits) | idx;
    }

    /// The object with this id, or null (never given out, or freed).
    T *find(uint64_t id) const
    {
        uint32_t idx = static_cast<uint32_t>(id) & id_index_mask;
        return ((id >> 32) == 0) && (idx < m_slots.size()) &&
               (m_gen[idx] == (static_cast<uint32_t>(id) >> id_bits)) ? m_slots[idx] : nullptr;
    }

    void remove(uint32_t id)
    {
        uint32_t idx = id & id_index_mask;
        m_slots[idx] = nullptr;
        m_gen[idx]   = static_cast<uint16_t>((m_gen[idx] + 1) & ((1u << (32 - id_bits)) - 1));
        m_free.push_back(idx);
    }

    /// Every slot (null where free), for slow-path walks.
    const std::vector<T *> &slots() const { return m_slots; }

private:
    std::vector<T *>      m_slots;
    std::vector<uint16_t> m_gen;
    std::vector<uint32_t> m_free;
};

/// ud_zv settings (the glue fills them from UCX_UD_ZV_*). Times in UCX
/// time units (ucs_time_t).
struct ud_settings {
    iface::iface_settings  common;
    unsigned               rx_batch;
    unsigned               max_inline;
    rel::settings          rel;
    iface::fault_settings  fault;
    // uc_zv only (uc == true): connected UC queue pairs instead of one UD QP.
    bool                   uc           = false;
    unsigned               seg_size     = 0;  ///< largest active message
    unsigned               max_write    = 0;  ///< largest RDMA write per packet
    double                 conn_timeout = 0;  ///< seconds to connect
    /// Every message within one packet (auto: on for Soft-RoCE).
    ucs_on_off_auto_value_t one_packet  = UCS_CONFIG_AUTO;
};

struct ud_ep;
struct ud_iface;

/// Send descriptor: at the start of a registered tx buffer, followed by
/// the header and the copied payload. Released (buffer back to the pool,
/// completion called) when it is acknowledged and no work request that
/// reads it is still posted.
struct tx_desc {
    rel::tx_pkt       pkt;       ///< first: the sender links these
    ud_ep            *ep;
    uct_completion_t *comp;
    iface::buffer    *buf;
    ucs_status_t      status;
    uint16_t          in_flight; ///< posted work requests not completed
    bool              acked;
    uint8_t           num_sge;
    uint8_t           opcode;      ///< IBV_WR_SEND, or RDMA_WRITE_WITH_IMM (uc_zv put)
    uint32_t          rkey;        ///< put
    uint64_t          remote_addr; ///< put
    ibv_sge           sge[max_sge];

    ud_hdr *hdr() { return reinterpret_cast<ud_hdr *>(this + 1); }
    char *payload() { return reinterpret_cast<char *>(hdr() + 1); }
};

/// Receiving side of a connection (created by a peer's CREQ).
struct rx_conn {
    uint32_t           id        = 0;
    uint32_t           peer_ep   = 0;  ///< the sending endpoint's id at the peer
    uint32_t           peer_qpn  = 0;
    iface::device_addr peer      = {};
    ibv_ah            *ah        = nullptr;
    ibv_qp            *qp        = nullptr; ///< uc_zv: the QP it arrives on
    rel::receiver      rx;
    ud_ep             *partner   = nullptr;
    rx_conn           *owe_next  = nullptr; ///< on the iface's list of owed acks
    bool               on_owe    = false;
    // Liveness of the sending endpoint (ud_zv, ud_reclaim.cc).
    bool               heard     = false; ///< an ALIVE since the last scan
    uint8_t            quiet     = 0;     ///< scans in a row with nothing new
    uint16_t           seen_psn  = 0;     ///< rx.ack_psn() at the last scan
};

/// What is kept of a reclaimed receive connection, so that an endpoint that
/// was only silent finds its stream where it left it (ud_reclaim.cc).
struct grave {
    iface::device_addr peer     = {};
    uint32_t           peer_qpn = 0;
    uint32_t           peer_ep  = 0;
    uint16_t           last_psn = 0; ///< last psn delivered
    uint32_t           now_id   = 0; ///< the connection it came back as (0: none)
};

/// The ud_zv interface. 'super' first: UCT casts uct_iface_h to it.
struct ud_iface {
    iface::zv_iface          super;
    ud_settings              settings;
    ibv_cq                  *send_cq  = nullptr;
    ibv_cq                  *recv_cq  = nullptr;
    ibv_qp                  *qp       = nullptr;
    iface::buffer_pool       rx_pool;
    iface::buffer_pool       tx_pool;       ///< descriptors with a full packet
    iface::buffer_pool       tx_small_pool; ///< descriptors with <= small_payload
    iface::release_desc      release_desc;
    unsigned                 rx_posted      = 0;
    unsigned                 max_inline     = 0; ///< granted by the device
    unsigned                 max_payload    = 0; ///< bytes after ud_hdr in one packet
    unsigned                 tx_outstanding = 0; ///< work requests posted
    /// Work requests that may be outstanding: TX_QUEUE_LEN, or 0 while the
    /// ud_zv QP is broken, so that nothing is posted to it (sends, resends,
    /// control packets, pending requests) until it has been reset.
    unsigned                 tx_limit       = 0;
    size_t                   rx_headroom    = 0;
    size_t                   rx_offset      = grh_len; ///< ud: GRH; uc: 0

    // uc_zv: one SRQ, connections set up by the shared connection manager,
    // packets matched to objects by the queue pair they arrive on.
    bool                     uc   = false;
    ibv_srq                 *srq  = nullptr;
    iface::conn_manager      conn;
    std::unordered_map<uint32_t, ud_ep *>   ep_by_qp;
    std::unordered_map<uint32_t, rx_conn *> conn_by_qp;

    id_table<ud_ep>          eps;
    id_table<rx_conn>        conns;
    /// (peer gid, peer QP, peer endpoint id) -> receive connection id.
    std::map<std::tuple<std::vector<uint8_t>, uint32_t, uint32_t>, uint32_t> conn_by_key;
    std::map<std::vector<uint8_t>, ibv_ah *> ahs;
    /// ud_zv: (peer gid, peer QP) -> its receive connections here, at most
    /// settings.common.max_peer_conns (UCX_UD_ZV_MAX_PEER_CONNS).
    std::map<std::pair<std::vector<uint8_t>, uint32_t>, unsigned> conns_per_peer;
    bool                     warned_peer_limit = false;
    /// No send descriptor left and the pool cannot grow (registration
    /// failed): pending_add queues instead of answering BUSY until an
    /// acknowledgement returns one.
    bool                     tx_starved = false;

    ud_ep                   *busy_eps    = nullptr; ///< eps with unacked packets
    ud_ep                   *pending_eps = nullptr; ///< eps with queued requests
    rx_conn                 *owe_conns   = nullptr; ///< conns owing an ack
    std::vector<ud_ep *>     graveyard;  ///< destroyed eps with sends still posted
    bool                     in_progress = false; ///< inside progress(): defer frees
    /// ud_zv: the interface's QP entered the error state (a send failed
    /// locally, as on Soft-RoCE while the link is down). Nothing is posted
    /// until every work request has flushed; then it is reset, keeping its
    /// number, and the reliability protocol resends what was lost.
    bool                     qp_broken = false;
    unsigned                 progress_count = 0;
    ucs_time_t               next_scan   = 0; ///< ud_zv: of receive connections
    uint64_t                 reclaimed   = 0; ///< receive connections whose peer vanished
    uint64_t                 probed      = 0; ///< PROBEs sent
    uint64_t                 revived     = 0; ///< reclaimed connections whose endpoint came back
    /// Reclaimed receive connections by id, the oldest dropped beyond
    /// max_graves (ud_reclaim.cc).
    std::unordered_map<uint32_t, grave> graves;
    std::deque<uint32_t>     grave_order;
    ucs_time_t               next_timer  = 0;
    ucs_time_t               timer_tick  = 0;

    iface::fault_injector    fault;
    iface::buffer           *held_buf = nullptr; ///< fault injection: reordered packet
    ibv_wc                   held_wc  = {};

    // Statistics (debug log at close; tests read them).
    uint64_t                 resent = 0, dup_rx = 0, gap_rx = 0, bad_rx = 0, rx_puts = 0,
                             tx_put_zcopy = 0, spoofed_rx = 0, refused_conns = 0,
                             qp_resets = 0;
};

inline ud_iface *to_ud(uct_iface_h iface) { return reinterpret_cast<ud_iface *>(iface); }

[[nodiscard]] ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const ud_settings &settings,
                                      uct_iface_h *iface_p);

// Shared between the ud_*.cc files and uc.cc.
/// UCP releases a receive buffer it kept (uct_recv_desc_t callback).
void release_rx(uct_recv_desc_t *self, void *desc);
/// Poll the receive CQ: handle what arrived, send due acks, repost.
unsigned poll_rx(ud_iface *iface);
/// Owed acks and NAKs that are due go out as packets of their own.
void send_acks(ud_iface *iface, ucs_time_t now);
/// Post up to 'count' receive buffers (none while the QP is broken).
void post_rx(ud_iface *iface, unsigned count);
/// A work request failed: ud_zv marks a QP in the error state broken
/// (recover_qp() resets it), uc_zv fails the endpoint whose QP it is.
void note_qp_error(ud_iface *iface, const ibv_wc &wc);
/// Reset a broken QP once every work request posted to it has flushed.
void recover_qp(ud_iface *iface);
ucs_status_t post_desc(ud_iface *iface, ud_ep *ep, tx_desc *d);
/// Post a control packet (ACK, NAK, CREP, DISC) on 'qp' (ud: the iface QP
/// with ah/qpn; uc: the connection's QP).
ucs_status_t send_ctl(ud_iface *iface, ibv_qp *qp, ibv_ah *ah, uint32_t qpn,
                      const ud_hdr &hdr, const void *body, size_t body_len);
/// A control packet from receive connection c to its endpoint: 'type',
/// ack_psn the last psn delivered, then 'body'.
ucs_status_t send_to_ep(ud_iface *iface, const rx_conn *c, uint8_t type, const void *body,
                        size_t body_len);
/// A reliable packet (AM or, with am == false, a completed put) for 'c':
/// the reliability verdict, then delivery. Returns true when UCP kept b.
bool deliver_data(ud_iface *iface, rx_conn *c, const ud_hdr &hdr, const char *body,
                  size_t body_len, iface::buffer *b, bool am);
ucs_status_t ah_for(ud_iface *iface, const iface::device_addr &peer, ibv_ah **ah_p);
void release_desc(ud_iface *iface, tx_desc *d);
void owe_link(ud_iface *iface, rx_conn *c);
void dispatch_pending(ud_iface *iface);
void free_deferred(ud_iface *iface);
void ep_free(ud_ep *ep);
unsigned check_timers(ud_iface *iface, ucs_time_t now);
/// ud_zv: probe receive connections that heard nothing for a peer timeout,
/// free those whose endpoint did not answer for another (ud_reclaim.cc).
void scan_conns(ud_iface *iface, ucs_time_t now);
/// A new receive connection for endpoint peer_ep of the peer interface
/// (dev, src_qp), expecting first_psn; null when refused (counted, logged).
rx_conn *conn_new(ud_iface *iface, const iface::device_addr &dev, uint32_t src_qp,
                  uint32_t peer_ep, rel::psn_t first_psn);
/// Data for connection id, which is not there: if it was reclaimed, bring it
/// back where it was and tell its endpoint (REBIND); else null.
rx_conn *revive(ud_iface *iface, uint32_t id, uint32_t src_qp);
/// A DISC for connection id, which is not there: true if it was reclaimed
/// (what was kept of it, and what it came back as, are dropped).
bool forget(ud_iface *iface, uint32_t id, uint32_t src_qp, uint32_t peer_ep);
/// A PROBE for endpoint hdr.dest from src_qp: answer ALIVE if it is there.
void answer_probe(ud_iface *iface, const ud_hdr &hdr, uint32_t src_qp, const char *body);
void handle_ep_packet(ud_iface *iface, const ud_hdr &hdr, uint32_t src_qp,
                      const char *body, size_t body_len);
void conn_free(ud_iface *iface, rx_conn *c);
/// ACK, NAK, CREP or a piggybacked ack for a known endpoint.
void ep_packet(ud_ep *ep, const ud_hdr &hdr, const char *body);

// uc_zv (src/uc/uc.cc): its receive path, resources and operations.
bool uc_handle(ud_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b);
[[nodiscard]] ucs_status_t uc_create_resources(ud_iface *iface);
/// The ud_zv ops with uc_zv's endpoint lifecycle, puts and query.
uct_iface_ops_t uc_make_ops(uct_iface_ops_t ops);
/// Whether uc_zv keeps every message within one packet (UCX_UC_ZV_ONE_PACKET,
/// auto resolved against the device); logs the choice.
bool uc_one_packet(const ud_iface *iface);
using iface::gid_key;

} // namespace zv::ud

#endif
