// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram core under ud_zv and uc_zv: packets, send
// descriptors, endpoints and receive connections, acknowledgements,
// retransmission, timers. The transports (src/ud, src/uc) supply the queue
// pairs and the connection setup (rd_transport).
#ifndef ZV_RD_RD_IFACE_H
#define ZV_RD_RD_IFACE_H

#include "iface/buffer_pool.h"
#include "iface/fault.h"
#include "iface/rx_ring.h"
#include "iface/zv_iface.h"
#include "rd/rd_async.h"
#include "rd/rd_wire.h"
#include "rd/rel.h"
#include "verbs/owned.h"
#include "util/nothrow.h"
#include "verbs/qp.h"

#include <algorithm>
#include <cstring>

#include <ucs/time/time.h>

#include <atomic>
#include <vector>

namespace zv::rd {

/*
 * A connection is one-directional: an endpoint (rd_ep, what UCT hands to
 * UCP) sends, and a receive connection (rx_conn, at the peer) receives and
 * acknowledges. Every packet starts with rd_hdr (rd_wire.h). Sequence
 * numbers, the window, acks and retransmission are rel.h's. When an
 * endpoint and a receive connection join the same pair of interfaces, they
 * are partners: the receive connection's ack rides in the endpoint's DATA
 * headers (ack_dest/ack_psn) instead of a packet of its own.
 *
 * What carries the packets is the transport's: ud_zv (src/ud) sends them as
 * datagrams on one UD QP per interface and sets connections up in band
 * (CREQ/CREP, psn 0 of the stream); uc_zv (src/uc) sends them on connected
 * UC QPs that the connection manager sets up. The core sees a transport
 * through rd_transport, through the tenant its progress is compiled for
 * (rd_progress_inl.h), and through data: each endpoint and receive
 * connection names the QP it sends on and, for a datagram QP, the address
 * handle and QP number of the peer.
 */

/// Payload that fits a small send buffer: short messages, connection
/// requests, zero-copy headers, control packets. Everything else (bcopy)
/// takes a full packet-sized buffer.
constexpr size_t small_payload = 128;

constexpr unsigned max_sge   = 4;  ///< header + up to 3 iov entries
/// Send completions taken from the CQ at once (rd_iface::tx_wc).
constexpr unsigned tx_poll_batch = 16;
/*
 * A send work request's wr_id. A signaled one names what its completion
 * gives back (a descriptor, or with wr_id_ctl a control packet's buffer:
 * none when it went inline) and, in the top byte, how many work requests
 * that completion covers: itself and the unsignaled ones posted before it
 * since the last signaled one (user-space addresses fit in 56 bits). An
 * unsignaled one is wr_id_silent: it completes only when it is flushed.
 */
constexpr uint64_t wr_id_ctl         = 1; ///< a control packet (no descriptor)
constexpr uint64_t wr_id_silent      = 2; ///< an unsignaled work request
/// With wr_id_ctl: a marker posted to a QP in the error state (uc_zv), no
/// buffer; its flush says that everything posted before it completed.
constexpr uint64_t wr_id_marker      = 4;
constexpr unsigned wr_id_cover_shift = 56;
constexpr uint64_t wr_id_ptr_mask    = (uint64_t(1) << wr_id_cover_shift) - 1;
/// Largest moderation: what the top byte of wr_id can count.
constexpr unsigned max_tx_moderation = 128;
constexpr unsigned id_bits   = 20;
constexpr uint32_t id_index_mask = (1u << id_bits) - 1;
/// Largest transport header in front of rd_hdr in a receive buffer (the
/// GRH of a datagram).
constexpr size_t   max_rx_offset = 40;

/// Objects by 32-bit id: a slot index (low id_bits) and a generation (high
/// bits), so an id of a freed object no longer finds anything after its
/// slot is reused. Id 0 is never given out ("none"): its slot is made by
/// the first reserve(), so that building a table allocates nothing.
template <class T> class id_table {
public:
    bool full() const { return m_free.empty() && (m_slots.size() > id_index_mask); }
    /// Objects stored.
    size_t count() const { return m_slots.empty() ? 0 : m_slots.size() - 1 - m_free.size(); }

    /// Room for one add() that allocates nothing (and for remove() never
    /// to allocate): UCS_OK, or UCS_ERR_NO_MEMORY. Slow path.
    [[nodiscard]] ucs_status_t reserve()
    {
        const size_t n = std::max<size_t>(m_slots.size(), 1) + 1;
        if (!m_free.empty() || ((m_slots.capacity() >= n) && (m_gen.capacity() >= n) &&
                                (m_free.capacity() >= n))) {
            return UCS_OK;
        }
        const ucs_status_t status = util::try_alloc([&] {
            util::reserve_at_least(m_slots, n);
            util::reserve_at_least(m_gen, n);
            util::reserve_at_least(m_free, n); // (each slot is on it at most once)
        });
        if ((status == UCS_OK) && m_slots.empty()) {
            m_slots.push_back(nullptr); // id 0 (within the room just made)
            m_gen.push_back(0);
        }
        return status;
    }

    /// Store p; returns its id, or 0 when out of memory (never after
    /// reserve()). The caller checked full().
    uint32_t add(T *p)
    {
        if (reserve() != UCS_OK) {
            return 0;
        }
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

/// Settings of the core (the glue fills them from UCX_UD_ZV_*/UCX_UC_ZV_*).
/// Times in UCX time units (ucs_time_t).
struct rd_settings {
    iface::iface_settings  common;
    unsigned               rx_batch;
    unsigned               max_inline;
    /// Signal one send in this many on each send queue (1: every one). A
    /// send queue completes in posting order, so a completion covers the
    /// unsignaled work requests before it (send_queue).
    unsigned               tx_moderation = 1;
    rel::settings          rel;
    iface::fault_settings  fault;
};

struct rd_ep;
struct rd_iface;

/// One QP's send queue, for send moderation: its work requests are
/// numbered in the order they are posted, from 1, and complete in that
/// order. ud_zv has one for all its endpoints (the interface's); each uc_zv
/// endpoint has its own QP and so its own. (uc_zv's control packets, which
/// go out on QPs of its endpoints' but are always signaled, are numbered in
/// the interface's, which then has nothing unsignaled.)
struct send_queue {
    unsigned unsignaled    = 0; ///< posted since the last signaled one
    uint64_t posted        = 0; ///< number of the last one posted
    uint64_t last_signaled = 0; ///< number of the last signaled one
    /// Every work request up to this number is finished with (completed,
    /// flushed, or gone with a reset).
    uint64_t done          = 0;
};

/// Where a work request goes: a datagram's address (ud: on a connected QP
/// the provider ignores it) or an RDMA operation's target (rdma). What a
/// descriptor carries is copied whole into its work request, so that
/// posting it needs to know neither.
union wr_target {
    decltype(ibv_send_wr::wr.ud)   ud;
    decltype(ibv_send_wr::wr.rdma) rdma;
};
static_assert(sizeof(wr_target) <= sizeof(ibv_send_wr::wr), "a part of the work request's");

/// Send descriptor: at the start of a registered tx buffer, followed by
/// the header and the copied payload. Released (buffer back to the pool,
/// completion called) when it is acknowledged and no work request that
/// reads it is still posted. An acknowledgement says that its packet was
/// transmitted, so the one unsignaled posting a descriptor can have (its
/// first) was read by then; a descriptor dropped without an
/// acknowledgement (its endpoint failed or was destroyed) waits until the
/// send queue is known to have passed that posting (settle_dropped()); when
/// it has a completion (a zero-copy send, whose sges read the user's
/// memory), destroying its endpoint waits for that (ep_release()).
struct tx_desc {
    rel::tx_pkt       pkt;       ///< first: the sender links these
    rd_ep            *ep;
    uct_completion_t *comp;
    iface::buffer    *buf;
    uint64_t          silent_seq; ///< its unsignaled posting's number in ep->sq (0: none)
    tx_desc          *park_next;  ///< on rd_iface::parked
    ucs_status_t      status;
    uint16_t          in_flight; ///< posted signaled work requests not completed
    bool              acked;
    uint8_t           num_sge;
    uint8_t           opcode;      ///< IBV_WR_SEND, or what its transport made it
    uint32_t          imm_data;    ///< of an opcode with immediate data
    wr_target         target;      ///< the endpoint's, or what its transport made it
    ibv_sge           sge[max_sge];

    rd_hdr *hdr() { return reinterpret_cast<rd_hdr *>(this + 1); }
    char *payload() { return reinterpret_cast<char *>(hdr() + 1); }
};

/// Receiving side of a connection.
struct rx_conn {
    uint32_t           id        = 0;
    uint32_t           peer_ep   = 0;  ///< the sending endpoint's id at the peer
    uint32_t           peer_qpn  = 0;
    iface::device_addr peer      = {};
    ibv_qp            *qp        = nullptr; ///< what its acks go out on (null while
                                            ///< uc_zv resets it: they wait)
    ibv_ah            *ah        = nullptr; ///< of the peer, on a datagram QP
    rel::receiver      rx;
    rd_ep             *partner   = nullptr;
    rx_conn           *owe_next  = nullptr; ///< on the iface's list of owed acks
    bool               on_owe    = false;
    // Liveness of the sending endpoint, for a transport that reclaims
    // connections without one (ud_zv: ud_reclaim.cc).
    bool               heard     = false; ///< an ALIVE since the last scan
    uint8_t            quiet     = 0;     ///< scans in a row with nothing new
    uint16_t           seen_psn  = 0;     ///< rx.ack_psn() at the last scan
};

/// What a transport does that the core cannot, off the receive path: it is
/// the one that knows its queue pairs. Chosen when the interface opens;
/// constant. (What a received packet is for is the tenant's, a parameter
/// of the progress function: rd_progress_inl.h.)
struct rd_transport {
    const char *name;   ///< "ud_zv"
    const char *prefix; ///< of its variables: "UCX_UD_ZV_"
    /// A work request completed with an error.
    void (*wc_error)(rd_iface *iface, const ibv_wc &wc);
    /// The device reported queue pair 'qpn' in the error state.
    void (*qp_fatal)(rd_iface *iface, uint32_t qpn);
    /// Receive connection c is about to be freed (may be null).
    void (*conn_freed)(rd_iface *iface, rx_conn *c);
    /// Endpoint ep is about to be freed (may be null).
    void (*ep_freed)(rd_ep *ep);
    /// Each endpoint sends on a QP of its own (uc_zv), not on the
    /// interface's one (ud_zv): it has its own send_queue.
    bool own_send_queues;
    /// Nothing of the transport's own needs the timer (a QP to reset, a
    /// connection handshake): with the core idle too, the async side's
    /// timer may sleep (rd_async.cc).
    bool (*idle)(const rd_iface *iface);
};

/// The core of an interface; a transport's interface starts with it. 'super'
/// first: UCT casts uct_iface_h to it.
struct rd_iface {
    iface::zv_iface          super;
    const rd_transport      *tl       = nullptr;
    rd_settings              settings;
    /// Destroyed by close_cqs(), after the transport's QPs on them.
    verbs::cq                send_cq;
    verbs::cq                recv_cq;
    /// A CQ of the transport's own that a peer's first packet reaches
    /// (uc_zv's connection manager, which owns it): armed with recv_cq
    /// when the async side's timer sleeps.
    ibv_cq                  *conn_cq  = nullptr;
    iface::buffer_pool       rx_pool;
    iface::rx_ring           rx_ring;
    /// Receive descriptors UCP keeps (its handler answered UCS_INPROGRESS)
    /// and has not released yet, and how many it may keep: beyond, active
    /// messages are refused but answered (deliver_data), so the sender
    /// holds back and resends. With the async side's deferred messages
    /// this bounds the receive buffers at 4 x RX_QUEUE_LEN.
    unsigned                 rx_held     = 0;
    unsigned                 rx_max_held = 0;
    /// The receive path's one compare: with rx_held at or beyond it, an
    /// active message takes the slow path (refused, or deferred by the
    /// async side). rx_max_held; 0 while the ring is starved or the async
    /// side runs (rx_limit_update()).
    unsigned                 rx_hold_limit = 0;
    iface::buffer_pool       tx_pool;       ///< descriptors with a full packet
    iface::buffer_pool       tx_small_pool; ///< descriptors with <= small_payload
    iface::release_desc      release_desc;
    uint32_t                 addr_qpn       = 0; ///< the interface address
    uint32_t                 qkey           = 0; ///< of a datagram QP's peers
    unsigned                 max_inline     = 0; ///< granted by the device
    unsigned                 max_payload    = 0; ///< bytes after rd_hdr in one packet
    unsigned                 tx_outstanding = 0; ///< work requests posted
    ibv_send_wr              tx_wr          = {}; ///< post_desc's, reused
    // Send moderation (settings.tx_moderation).
    send_queue               sq;                 ///< the QP's (ud_zv); control packets'
    unsigned                 tx_signaled    = 0; ///< signaled work requests not completed
    /// Unsignaled work requests no completion has covered yet, over all
    /// send queues. Each holds a unit of tx_outstanding until a later
    /// signaled one on its queue completes; past tx_silent_max every send
    /// is signaled, so that endpoints gone quiet with an unsignaled tail
    /// (uc_zv: one per QP) hold at most that much of the send budget.
    unsigned                 tx_silent      = 0;
    unsigned                 tx_silent_max  = 0;
    uint64_t                 tx_posted      = 0; ///< work requests posted (statistic)
    /// The batch of send completions poll_tx() works through: here, not on
    /// its stack, so that a poll_tx() nested in one of its callbacks (an
    /// endpoint destroyed there waits for its sends) takes the rest of the
    /// batch first instead of waiting for entries already taken.
    ibv_wc                   tx_wc[tx_poll_batch] = {};
    unsigned                 tx_wc_next     = 0;
    unsigned                 tx_wc_count    = 0;
    /// Dropped descriptors whose unsignaled posting may still be queued.
    tx_desc                 *parked         = nullptr;
    /// The ones settle_parked() is working through (the interface's, as
    /// tx_wc: a call nested in one of its callbacks goes on with them).
    tx_desc                 *settling       = nullptr;
    /// Work requests that may be outstanding: TX_QUEUE_LEN, or 0 while the
    /// transport's QP is broken (tx_paused) or the port is down, so that
    /// nothing is posted (sends, resends, control packets, pending
    /// requests) until it has been reset or the port is back
    /// (tx_limit_update()).
    unsigned                 tx_limit       = 0;
    bool                     tx_paused      = false;
    /// The interface's port is down (device event): the peers' silence is
    /// explained, so endpoints neither resend nor time out, up to
    /// port_down_limit(); at port up they resend at once and give each peer
    /// a whole TIMEOUT.
    bool                     port_down      = false;
    ucs_time_t               port_down_at   = 0;
    size_t                   rx_headroom    = 0;
    size_t                   rx_offset      = 0; ///< of rd_hdr in a receive buffer

    id_table<rd_ep>          eps;
    id_table<rx_conn>        conns;
    /// No send descriptor left and the pool cannot grow (registration
    /// failed): pending_add queues instead of answering BUSY until an
    /// acknowledgement returns one.
    bool                     tx_starved = false;

    rd_ep                   *busy_eps    = nullptr; ///< eps with unacked packets
    rd_ep                   *pending_eps = nullptr; ///< eps with queued requests
    rx_conn                 *owe_conns   = nullptr; ///< conns owing an ack
    /// Destroyed eps with sends still posted; room for every endpoint is
    /// made when one is created (ep_new), so ep_release() allocates nothing.
    std::vector<rd_ep *>     graveyard;
    /// Depth of progress calls (a handler may progress its own worker, and
    /// an endpoint's destroy or a device event runs as one): while above
    /// 0, frees are deferred, until the outermost call ends.
    uint32_t                 in_progress = 0;
    bool                     now_valid   = false; ///< 'now' was read in this progress
    ucs_time_t               now         = 0;
    /// Progress calls so far; the async side reads it without the gate
    /// (async_tick), hence atomic (relaxed: plain moves).
    std::atomic<unsigned>    progress_count{0};
    ucs_time_t               next_timer  = 0;
    ucs_time_t               timer_tick  = 0;

    /// Progress without the application (rd_async.h): the gate every
    /// entry point of the worker passes, and what the async side defers.
    async_state              as;
    /// The transport's progress without the gate, as the async side runs
    /// it (the variant for the interface's fault setting).
    unsigned               (*core_progress)(rd_iface *iface) = nullptr;

    iface::fault_injector    fault;
    iface::buffer           *held_buf = nullptr; ///< fault injection: reordered packet
    ibv_wc                   held_wc  = {};

    // Statistics (debug log at close; tests read them). The transport adds
    // its own to them before close().
    uint64_t                 resent = 0, dup_rx = 0, gap_rx = 0, bad_rx = 0, rx_puts = 0,
                             tx_put_zcopy = 0, spoofed_rx = 0, refused_conns = 0,
                             qp_resets = 0, reclaimed = 0, tx_completions = 0,
                             acks_alone = 0, ///< ACK/NAK packets of their own (not piggybacked)
                             rx_refused = 0; ///< messages refused: UCP holds its bound, or no buffer to repost
};

inline rd_iface *to_rd(uct_iface_h iface) { return reinterpret_cast<rd_iface *>(iface); }

/// The time: read once per progress call (everything one progress call
/// handles happens "now"), and afresh on every call outside progress.
inline ucs_time_t clock_now(rd_iface *iface)
{
    if (!iface->in_progress) {
        return ucs_get_time();
    }
    if (!iface->now_valid) {
        iface->now       = ucs_get_time();
        iface->now_valid = true;
    }
    return iface->now;
}

// ---------------------------------------------------------------- interface

/// First half of opening: UCT's base interface and the completion queues.
/// The transport then creates its QPs and sets max_payload, max_inline,
/// rx_offset, addr_qpn and qkey. On failure (and on a failure after it)
/// the transport's iface_close() undoes what was done.
[[nodiscard]] ucs_status_t open_begin(rd_iface *iface, const rd_transport *tl,
                                      const uct_iface_ops_t *ops, uct_md_h md,
                                      uct_worker_h worker, const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const rd_settings &settings);
/// Second half: the buffer pools (sends of up to tx_payload bytes), fault
/// injection, timers, and the receive buffers posted to 'srq' or 'qp'.
[[nodiscard]] ucs_status_t open_finish(rd_iface *iface, const uct_iface_params_t *params,
                                       size_t tx_payload, ibv_srq *srq, ibv_qp *qp);
/// Free every endpoint and receive connection (before the transport
/// destroys its QPs' peers' state).
void close_eps(rd_iface *iface);
/// Destroy the completion queues, then the async side's channel they are
/// on (the transport destroyed its QPs).
void close_cqs(rd_iface *iface);
/// Log the statistics, drop a held packet: first thing at close.
void close_begin(rd_iface *iface);
ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr);
ucs_status_t get_address(uct_iface_h uct_iface, uct_iface_addr_t *addr);
ucs_status_t iface_flush(uct_iface_h uct_iface, unsigned, uct_completion_t *comp);
ucs_status_t iface_fence(uct_iface_h, unsigned);

// progress_begin(), what every progress does first, is in
// rd_progress_inl.h: compiled into each transport's progress.
void free_deferred(rd_iface *iface);
/// What every progress does last (inline: two tests on the hot path).
inline void progress_end(rd_iface *iface)
{
    const uint32_t depth = --iface->in_progress;
    if (__builtin_expect(!iface->graveyard.empty(), 0) && (depth == 0) && !iface->as.active) {
        free_deferred(iface);
    }
}
/// The transport's progress function for this interface's fault setting:
/// it installs 'faulty' in the ops when fault injection is on ('plain' is
/// what the constant ops table holds). progress_enable() registers it.
void choose_progress(rd_iface *iface, uct_iface_progress_func_t faulty);
/// uct_iface_progress_enable: the progress function choose_progress() left.
void progress_enable(uct_iface_h iface, unsigned flags);

// ---------------------------------------------------------------- core

/// UCP releases a receive buffer it kept (uct_recv_desc_t callback).
void release_rx(uct_recv_desc_t *self, void *desc);
/// Owed acks and NAKs that are due go out as packets of their own.
void send_acks(rd_iface *iface, ucs_time_t now);
/// Post d; 'first': its first posting, which may go unsignaled (a resend
/// is always signaled).
ucs_status_t post_desc(rd_iface *iface, rd_ep *ep, tx_desc *d, bool first);
/// Handle send completions: the rest of the batch being handled (when
/// nested in a callback of it), else a new batch from the send CQ.
/// Returns the completions taken from the CQ.
unsigned poll_tx(rd_iface *iface);
/// A signaled work request was posted on sq: it covers sq's unsignaled ones.
void posted_signaled(rd_iface *iface, send_queue *sq);
/// d leaves its endpoint's window without an acknowledgement (ep_fail,
/// ep_release): released once no posting of it can still be read.
void settle_dropped(rd_iface *iface, tx_desc *d);
/// settle_dropped() again for every parked descriptor (the send queue moved).
void settle_parked(rd_iface *iface);
/// The transport reset its QP (ud_zv: the interface's one send queue):
/// every work request posted is gone.
void tx_reset(rd_iface *iface);
/// Post a control packet on 'qp' (on a datagram QP: to ah/qpn).
ucs_status_t send_ctl(rd_iface *iface, ibv_qp *qp, ibv_ah *ah, uint32_t qpn,
                      const rd_hdr &hdr, const void *body, size_t body_len);
/// A control packet from receive connection c to its endpoint: 'type',
/// ack_psn the last psn delivered, then 'body'.
ucs_status_t send_to_ep(rd_iface *iface, const rx_conn *c, uint8_t type, const void *body,
                        size_t body_len);
/// An active message for 'c' (b null: an injected duplicate): the
/// reliability verdict, then delivery. Returns true when UCP kept b.
bool deliver_data(rd_iface *iface, rx_conn *c, const parsed_pkt &p, iface::buffer *b);
/// A reliable packet for 'c' whose data the device already wrote in place
/// (an RDMA WRITE with immediate data, the transport's to decode into p):
/// the reliability verdict only, nothing is handed to UCP (b is not kept).
void deliver_in_place(rd_iface *iface, rx_conn *c, const parsed_pkt &p,
                      const iface::buffer *b);
/// tx_limit again, after tx_paused or port_down changed.
inline void tx_limit_update(rd_iface *iface)
{
    iface->tx_limit = (iface->tx_paused || iface->port_down) ? 0 :
                                                              iface->settings.common.tx_queue_len;
}
/// How long the port may stay down before the endpoints fail: 3 x TIMEOUT
/// (30 s by default, UCX's own ud timeout).
inline ucs_time_t port_down_limit(const rd_iface *iface)
{
    return 3 * iface->settings.rel.peer_timeout;
}
/// rx_hold_limit again, after the ring's starvation or the async side's
/// activity changed.
inline void rx_limit_update(rd_iface *iface)
{
    iface->rx_hold_limit = (iface->rx_ring.starved() || iface->as.active) ? 0 :
                                                                            iface->rx_max_held;
}
void release_desc(rd_iface *iface, tx_desc *d);
void owe_link(rd_iface *iface, rx_conn *c);
/// The sender of c asks for an ack now (ACK_REQ).
void ack_requested(rd_iface *iface, rx_conn *c);
/// A new receive connection (id given, rel state ready, partner found);
/// null when the table is full or memory is short.
rx_conn *conn_alloc(rd_iface *iface, rel::psn_t first_psn);
void conn_free(rd_iface *iface, rx_conn *c);
/// An endpoint of ours towards the same peer interface as c, without a
/// partner, becomes c's partner (and the other way round).
void find_partner(rd_iface *iface, rx_conn *c);
/// The same from a new endpoint's side.
void find_partner(rd_ep *ep);
/// Fail every endpoint still working ('why' for the log).
void fail_all(rd_iface *iface, const char *why);
/// The device's asynchronous events, as the core and the transport act on them.
void handle_event(iface::zv_iface *base, const verbs::async_event &ev);

// ---------------------------------------------------------------- async (rd_async.cc)

/// Start answering peers from the worker's async context (a timer in it,
/// thread mode); 'core' is the transport's progress without the gate.
/// Where that cannot be (signal mode, no membarrier), the interface works
/// as before and says why at diag level.
void async_open(rd_iface *iface, unsigned (*core)(rd_iface *iface));

/// The end of a transport's iface_open, 'status' being how open_begin(),
/// the transport's own part and open_finish() went. On failure the
/// transport's iface_close() undoes whatever was done (or, before
/// open_begin() got as far as UCT's interface, the object is deleted) and
/// the status is returned; on success the progress function for the
/// fault setting ('faulty' when injection is on) and the async side
/// ('core_faults' or 'core') start, and *iface_p is set.
template <class Iface>
[[nodiscard]] ucs_status_t open_end(Iface *iface, ucs_status_t status,
                                    uct_iface_progress_func_t faulty,
                                    unsigned (*core)(rd_iface *iface),
                                    unsigned (*core_faults)(rd_iface *iface), uct_iface_h *iface_p)
{
    rd_iface *rd     = &iface->super;
    uct_iface_t *uct = &rd->super.super.super;
    if (status != UCS_OK) {
        if (rd->tl != nullptr) { // (open_begin got as far as UCT's interface)
            uct->ops.iface_close(uct);
        } else {
            delete iface;
        }
        return status;
    }
    choose_progress(rd, faulty);
    async_open(rd, rd->fault.on() ? core_faults : core);
    *iface_p = uct;
    return UCS_OK;
}
/// Stop the timer (waits for a running tick) and drop what waits.
void async_close(rd_iface *iface);
/// The worker's progress: hand what the async side deferred to UCP, in
/// order. Returns the number handed over.
unsigned async_hand_over(rd_iface *iface);
/// Whether something waits for async_hand_over() (one load).
inline bool async_waiting(const rd_iface *iface)
{
    return iface->as.waiting;
}
/// The async side accepts an active message for later delivery; false
/// when it holds as many as it may (the sender will send it again).
bool async_defer_am(rd_iface *iface, uint8_t am_id, iface::buffer *b, unsigned length);
/// A completion (of endpoint 'ep_id'), from the async side.
void async_defer_completion(rd_iface *iface, uct_completion_t *comp, ucs_status_t status,
                            uint32_t ep_id);
/// An endpoint's failure, from the async side.
void async_defer_ep_fail(rd_iface *iface, uint32_t ep_id, ucs_status_t status,
                         const char *why);
/// The worker destroys endpoint 'ep_id': its deferred completions are
/// called now, its deferred failure is dropped.
void async_forget_ep(rd_iface *iface, uint32_t ep_id);
/// UCP's handler of an active message the core delivers (now, or later
/// from async_hand_over()); true when UCP kept the buffer.
bool invoke_am(rd_iface *iface, uint8_t am_id, iface::buffer *b, unsigned length);

} // namespace zv::rd

#endif