// SPDX-License-Identifier: BSD-3-Clause
// Connection setup for the connected transports (rc_zv, uc_zv) over a UD QP.
#ifndef ZV_IFACE_CONN_H
#define ZV_IFACE_CONN_H

#include "iface/zv_iface.h"
#include "util/nothrow.h"
#include "verbs/owned.h"
#include "verbs/qp.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace zv::iface {

/*
 * Why a handshake of our own: UCP can only use a transport alone when it can
 * connect to a peer's *interface* address (UCX's rc_verbs connects ep-to-ep
 * and needs an auxiliary transport for that). Each zv interface therefore
 * owns one small UD QP; its number is the interface address. To connect, an
 * endpoint creates its connected QP and sends REQ{conn_id, qpn} to the
 * peer's UD QP; the peer creates a passive QP (it feeds the peer's shared
 * receive queue), connects it and answers REP{conn_id, qpn}. REQ is
 * retransmitted with backoff until REP arrives or conn_timeout passes (then
 * the endpoint fails); a duplicate REQ gets the same REP, so lost or
 * crossing packets are harmless.
 *
 * One QP for both directions (rc_zv and uc_zv: init(share = true)). A
 * passive QP is adopted by the first local endpoint that connects back to
 * the interface it came from (claim()). The endpoint confirms it with a REQ naming the
 * peer QP it is already connected to (peer_qpn), and sends only after the
 * REP: the peer's QP is then known to be connected. Two interfaces that
 * connect to each other at the same time pair their fresh QPs instead: the
 * one with the larger address (GID, then UD QPN) connects its oldest fresh
 * QP towards that peer to the REQ's QP, answers with it, and confirms its
 * own like an adopted one; the smaller one leaves fresh REQs from that peer
 * unanswered while its own fresh ones are unanswered (they are sent again).
 * Either way an endpoint sends only once the peer's QP is connected.
 * A pair of processes that talk both ways then holds one QP at each end
 * per pair of endpoints, as UCX's rc_verbs does.
 *
 * Closing. A QP is destroyed once neither end uses it. The end whose user
 * left (release()) sends DISC, again with backoff until answered: the peer
 * answers ACK while an endpoint of its own still uses its end, and DONE
 * once it has destroyed its end (or never knew it). ACK holds the QP until
 * the peer's own DISC; DONE, or no answer within conn_timeout (the peer is
 * gone), ends it.
 *
 * Leftovers. A QP no local endpoint uses (a passive one not adopted, or
 * one whose DISC was acknowledged) is probed once per conn_timeout; a
 * failed probe destroys it. So a peer that dies leaves nothing here for
 * longer than about two conn_timeouts (and, over rc_zv, its retry limit).
 *  - rc_zv: the transport's probe, a zero-length RDMA WRITE, which the
 *    peer's device answers whether or not its process progresses. It fails
 *    (retry exceeded) once the peer's QP is gone with its process.
 *  - uc_zv: UC has no acknowledgements, so the probe is a DISC that asks
 *    the peer's interface whether it still uses its end: ACK keeps the QP,
 *    DONE ends it, and so does no answer within conn_timeout. A peer that
 *    progresses answers at once. One that does not progress for a
 *    conn_timeout, and sends nothing in that time, loses a connection only
 *    it uses; its next send on it then fails at its peer timeout.
 *    Under MPI both ends have an endpoint on the QP, and a QP that is used
 *    at this end is never probed.
 */

/// On-wire connection message (little-endian hosts; all fields validated).
struct __attribute__((packed)) conn_msg {
    static constexpr uint32_t magic_value = 0x5a56434e; // "ZVCN"
    enum : uint8_t { req = 1, rep = 2, disc = 3, ack = 4, done = 5 };

    uint32_t    magic;
    uint8_t     type;
    uint8_t     transport;  ///< IBV_QPT_RC or IBV_QPT_UC of the sender
    /// REQ, REP: the RDMA READ/atomics the sender's QP serves at a time
    /// (RC); 0: not said (UC, or a zverbs before this field, which served 4).
    uint8_t     rd_atomic;
    uint8_t     reserved;
    uint64_t    conn_id;    ///< REQ, REP: chosen by the initiator, unique per iface
    uint32_t    qpn;        ///< sender's connected QP (DONE: 0 if it knew none)
    uint32_t    ud_qpn;     ///< sender's UD QP, for replies
    device_addr dev;        ///< sender's port
    /// The receiver's QP that the sender's QP is connected to: REQ of an
    /// adopted QP, DISC, ACK, DONE; 0 in a REQ for a new QP.
    uint32_t    peer_qpn;
};

/// Validate a received connection message (after the GRH): length, magic,
/// the transport it is for, a known type. No state is touched.
[[nodiscard]] bool parse_conn_msg(const char *buf, size_t len, ibv_qp_type transport,
                                  conn_msg *out);

/// Whether a received 40-byte GRH area names 'gid' as the packet's source:
/// an IB/RoCE v1 GRH or a RoCE v2 IPv6 header (version 6, source GID at
/// byte 8), or RoCE v2's IPv4 header in its last 20 bytes (version 4, the
/// source address at byte 32, against an IPv4-mapped gid). True when the
/// area is neither: there is nothing to check it against.
[[nodiscard]] bool grh_source_matches(const char *grh, const uint8_t gid[16]);

/// What the transport does for the connection manager (slow path).
struct conn_callbacks {
    void *arg;
    /// Create a passive QP connected to the peer's qpn, into *qp_p.
    ucs_status_t (*accept)(void *arg, const verbs::remote_port &peer,
                           uint32_t peer_qpn, verbs::qp *qp_p);
    /// Connect an endpoint's QP (given to start()) to the peer's qpn.
    ucs_status_t (*connect)(void *arg, ibv_qp *qp, const verbs::remote_port &peer,
                            uint32_t peer_qpn);
    /// Connection 'conn_id' is established: its QP is connected to peer_qpn.
    void (*established)(void *arg, uint64_t conn_id, uint32_t peer_qpn);
    /// Connection 'conn_id' failed ('why' says how, for the log).
    void (*failed)(void *arg, uint64_t conn_id, ucs_status_t status, const char *why);
    /// A QP is about to be destroyed (neither end uses it); may be null.
    void (*released)(void *arg, ibv_qp *qp);
    /// Post a signaled probe on an unused QP; its completion is handed to
    /// probe_done(). May be null: unused QPs are then not probed.
    ucs_status_t (*probe)(void *arg, ibv_qp *qp);
};

/// Owns the UD QP of one interface and every connected QP it has set up
/// (passive ones, and endpoints' new ones handed to it by take()): an
/// endpoint only uses its QP, from take() or claim() until release(). A
/// QP is shared by design (an endpoint at each end, the manager closing it
/// with the peer after the endpoint left), so the manager owns it, not the
/// endpoint. Not thread safe (one interface, one thread at a time, as UCT
/// requires).
class conn_manager {
public:
    conn_manager() = default;
    ~conn_manager();
    conn_manager(const conn_manager &)            = delete;
    conn_manager &operator=(const conn_manager &) = delete;

    /// channel: completion channel for wakeup (may be null). A peer
    /// interface holds at most iface->settings.max_peer_conns passive QPs
    /// here; limit_var names that setting in the warning a refusal prints.
    /// share: one QP carries both directions (see above). rd_atomic: the
    /// RDMA READ/atomics our QPs serve at a time, told to peers (RC; 0: UC).
    [[nodiscard]] ucs_status_t init(zv_iface *iface, ibv_qp_type transport,
                                    const conn_callbacks &cb, double timeout_sec,
                                    ibv_comp_channel *channel, const char *limit_var,
                                    bool share, uint8_t rd_atomic = 0);

    /// Destroy every QP (no callbacks), the UD QP and its buffers; what
    /// init() made. The counters stay, for the close log. The interface
    /// calls it before it destroys the SRQ and CQs the QPs use.
    void shutdown();

    ibv_cq *cq() const { return m_cq.get(); }
    /// Poll completions into a stash for the next progress(); true if any.
    bool peek();

    uint32_t ud_qpn() const { return m_qp->qp_num; }

    /// A QP to the peer interface that it connected here and no endpoint
    /// uses (share only), now the caller's to use; null if none. The
    /// caller then start()s with it like with a new QP.
    ibv_qp *claim(const device_addr &peer, uint32_t peer_ud_qpn);
    /// A new QP (in RESET) of an endpoint towards the peer interface: the
    /// manager owns it from here on, the caller uses what this returns;
    /// null when out of memory (the QP is then destroyed).
    ibv_qp *take(verbs::qp qp, const device_addr &peer, uint32_t peer_ud_qpn);
    /// Start connecting conn_id over 'qp' (from take() or claim()): send
    /// REQ to the peer's UD QP. UCS_ERR_NO_MEMORY leaves the manager as
    /// it was (the caller release()s the QP as on any error).
    [[nodiscard]] ucs_status_t start(uint64_t conn_id, ibv_qp *qp);
    /// The caller is done with qp (from take() or claim(), started or
    /// not). Nothing of the caller's may be left posted on it. It is
    /// destroyed when the peer is done with its end too (at once if the
    /// peer never heard of it).
    void release(ibv_qp *qp);

    /// Bring a connected QP of ours that entered the error state back to
    /// RTS towards the same peer QP, keeping its number (the caller made
    /// sure nothing of its own is still posted on it: the reset drops it
    /// without completions). *qp_p is the QP. UCS_ERR_NO_ELEM: no such
    /// connected QP (any more).
    [[nodiscard]] ucs_status_t reconnect(uint32_t qpn, ibv_qp **qp_p);

    /// Handle incoming messages and retransmissions. Returns events handled.
    unsigned progress();

    /// Connections being set up or closed, or messages left unread: the
    /// interface then calls progress() every time, not only every so often. One
    /// load: the interface asks on every progress call, without the async
    /// gate (iface/async_gate.h), which progress() itself is called under.
    bool busy() const { return m_busy.load(std::memory_order_relaxed); }
    /// Have the worker's next progress call progress() (the async side
    /// left it something).
    void wake() { set_busy(true); }
    /// Messages dropped because they did not come from the interface they
    /// name, and connection requests refused by the per-peer limit.
    uint64_t spoofed() const { return m_spoofed; }
    uint64_t refused() const { return m_refused; }
    /// Times the connection QP was reset after entering the error state.
    uint64_t resets() const { return m_resets; }
    /// A probe posted by conn_callbacks::probe on QP qpn completed.
    void probe_done(uint32_t qpn, bool ok);
    /// Unused QPs destroyed because a probe of them failed (or, without a
    /// probe WR, went unanswered).
    uint64_t reclaimed() const { return m_reclaimed; }
    /// Most probe WRs in flight at once (the transport's completion queue
    /// has room for them).
    static constexpr unsigned max_probes = 16;

private:
    using clock = std::chrono::steady_clock;
    // A peer interface: (gid, UD qpn).
    using peer_key = std::pair<gid_key_t, uint32_t>;
    // A peer's QP: (gid, UD qpn, its QP number) -> ours connected to it.
    using remote_key = std::tuple<gid_key_t, uint32_t, uint32_t>;

    /// One connected QP of ours (keyed by its number).
    struct channel {
        device_addr       peer;
        uint32_t          peer_ud_qpn = 0;
        verbs::qp         qp;
        uint32_t          remote_qpn  = 0;     ///< 0 until connected
        uint8_t           rd_atomic   = 0;     ///< what the peer serves
        uint64_t          conn_id     = 0;     ///< while connecting
        bool              passive     = false; ///< created for a peer's REQ
        bool              owned       = false; ///< a local endpoint uses it
        bool              released    = false; ///< its endpoint left for good
        bool              connecting  = false; ///< our REQ is unanswered
        bool              closing     = false; ///< our DISC is unanswered
        bool              probing     = false; ///< a probe WR is posted on it
        bool              asking      = false; ///< our DISC is a probe (no probe WR)
        bool              doomed      = false; ///< destroyed once the probe completed
        bool              queued      = false; ///< connecting, REQ not sent yet (window)
        clock::time_point next_try;
        clock::time_point deadline;
        clock::duration   backoff{};
        clock::time_point next_probe; ///< unused ones: when to probe next
    };

    void set_busy(bool b) { m_busy.store(b, std::memory_order_relaxed); }
    void post_recv(unsigned index);
    void handle(const conn_msg &msg);
    void handle_req(const conn_msg &msg);
    void handle_close(const conn_msg &msg);
    bool from_sender(const ibv_wc &wc, const char *grh, const conn_msg &msg) const;
    ucs_status_t send(const device_addr &peer, uint32_t peer_ud_qpn,
                      const conn_msg &msg);
    ucs_status_t ah_for(const device_addr &peer, ibv_ah **ah_p);
    conn_msg make_msg(uint8_t type, uint64_t conn_id, uint32_t qpn,
                      uint32_t peer_qpn) const;
    /// Send what ch waits an answer to: REQ or DISC.
    void resend(const channel &ch);
    /// This interface's address (GID, then UD QPN) against the sender's:
    /// <0, 0 (the sender is this interface), >0.
    int compare(const conn_msg &msg) const;
    /// The oldest channel towards the peer whose fresh REQ is unanswered.
    channel *fresh_connecting(const peer_key &peer);
    channel *find(uint32_t qpn, const conn_msg &from);
    /// Connect ch's QP to the peer's remote_qpn; 'rd_atomic' is what the
    /// peer's message said it serves.
    ucs_status_t connect(channel &ch, uint32_t remote_qpn, uint8_t rd_atomic);
    /// Send ch's first REQ (it counts in its peer's window from now on);
    /// its deadline is armed by the next check_timers().
    void send_first(channel &ch);
    /// ch is connecting no more: out of m_connecting and of its peer's
    /// window, whose next queued REQ goes out.
    void stop_connecting(channel &ch);
    /// Connecting is over for ch (connected): tell its endpoint, or close
    /// it if it has none any more.
    void finish(uint32_t qpn);
    void fail(uint32_t qpn, ucs_status_t status, const char *why);
    /// ch's REQ (on QP qpn) timed out: fail it and every REQ queued
    /// behind it for the same peer.
    void fail_peer(const channel &ch, uint32_t qpn);
    /// False when out of memory: the channel is then left as it was.
    [[nodiscard]] bool begin_close(channel &ch);
    /// ch has no local user now: probe it from time to time.
    /// False when out of memory: the channel is then left as it was.
    [[nodiscard]] bool make_idle(channel &ch);
    /// REQs in flight to the peer interface.
    unsigned in_flight(const peer_key &pk) const;
    /// ch's DISC needs no answer any more (answered, or ch is used again).
    void end_asking(channel &ch);
    void start_probes(clock::time_point now);
    void destroy(uint32_t qpn);
    /// Send completions only: received messages polled meanwhile are kept
    /// for the next progress() (see conn.cc).
    void poll_send();
    /// A send completion is accounted for; false for a received message.
    bool send_done(const ibv_wc &wc);
    unsigned handle_wcs(const ibv_wc *wc, int n);
    /// A completion failed: if the QP is in the error state, stop posting
    /// until everything flushed, then reset it (recover()).
    void note_error(const ibv_wc &wc);
    void recover();
    unsigned check_timers();

    static constexpr unsigned rx_count  = 256; // a burst of requests at job start
    /// REQs in flight to one peer interface; the rest wait their turn (a
    /// burst of thousands would only be dropped by the peer's receive
    /// queue and retransmitted). Their CONN_TIMEOUT starts when sent.
    static constexpr unsigned req_window = 32;
    static constexpr unsigned rx_size   = 40 + 256; // GRH + message
    static constexpr uint32_t qkey      = 0x1a2b3c4d;

    zv_iface                          *m_iface   = nullptr;
    device_addr                        m_self    = {}; ///< this interface's port
    ibv_qp_type                        m_transport = IBV_QPT_RC;
    bool                               m_share   = false;
    uint8_t                            m_rd_atomic = 0; ///< what our QPs serve
    conn_callbacks                     m_cb      = {};
    clock::duration                    m_timeout = {};
    verbs::cq                          m_cq;
    verbs::qp                          m_qp;
    char                              *m_rx_mem  = nullptr;
    ibv_mr                            *m_rx_mr   = nullptr;
    unsigned                           m_tx_outstanding = 0;
    unsigned                           m_rx_posted = 0;
    /// The UD QP is in the error state (a send failed while the port was
    /// down): nothing is posted until it is reset.
    bool                               m_broken = false;
    uint64_t                           m_resets = 0;
    ucs_time_t                         m_flush_kicked = 0; ///< verbs::flush_receives()
    uint64_t                           m_reclaimed = 0;
    std::map<uint32_t, channel>        m_channels;   ///< by our QP number
    std::map<uint64_t, uint32_t>       m_connecting; ///< conn_id -> our QP
    std::set<uint32_t>                 m_closing;    ///< DISC unanswered
    std::set<uint32_t>                 m_idle;       ///< no local user, probed
    unsigned                           m_probes  = 0; ///< probe WRs or DISCs out
    clock::time_point                  m_next_scan;  ///< of m_idle for probes
    clock::time_point                  m_next_check; ///< of retransmissions, deadlines
    std::map<remote_key, uint32_t>     m_by_remote;
    std::map<peer_key, std::set<uint32_t>> m_unused; ///< passive, no user yet
    std::map<peer_key, unsigned>       m_per_peer;   ///< passive QPs per peer
    std::map<peer_key, unsigned>       m_in_flight;  ///< REQs sent, unanswered
    /// Channels waiting to send their REQ, oldest first (an entry whose
    /// channel is no longer queued is skipped).
    std::map<peer_key, std::deque<uint32_t>> m_queued;
    const char                        *m_limit_var = "";
    uint64_t                           m_spoofed = 0;
    uint64_t                           m_refused = 0;
    bool                               m_warned  = false;
    std::map<port_key_t, verbs::ah> m_ahs;
    /// What busy() answers: set when a connection starts opening or
    /// closing, recomputed at the end of every progress() (which is then
    /// called on every interface progress until it is false again).
    std::atomic<bool>                  m_busy{false};
    ibv_wc                             m_stash[16];
    int                                m_stash_count = 0;
};

} // namespace zv::iface

#endif
