// SPDX-License-Identifier: BSD-3-Clause
// Connection setup for the connected transports (rc_zv, uc_zv) over a UD QP.
#ifndef ZV_IFACE_CONN_H
#define ZV_IFACE_CONN_H

#include "iface/zv_iface.h"
#include "verbs/qp.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace zv::iface {

/*
 * Why a handshake of our own: UCP can only use a transport alone when it can
 * connect to a peer's *interface* address (UCX's rc_verbs connects ep-to-ep
 * and needs an auxiliary transport for that). Each zv interface therefore
 * owns one small UD QP; its number is the interface address. To connect, an
 * endpoint creates its connected QP and sends REQ{conn_id, qpn} to the
 * peer's UD QP; the peer creates a passive QP (receive side: it feeds the
 * peer's shared receive queue), connects it and answers REP{conn_id, qpn}.
 * REQ is retransmitted with backoff until REP arrives or conn_timeout
 * passes (then the endpoint fails); a duplicate REQ gets the same REP, so
 * lost or crossing packets are harmless. DISC (best effort) releases the
 * passive QP when the endpoint is destroyed.
 */

/// On-wire connection message (little-endian hosts; all fields validated).
struct __attribute__((packed)) conn_msg {
    static constexpr uint32_t magic_value = 0x5a56434e; // "ZVCN"
    enum : uint8_t { req = 1, rep = 2, disc = 3 };

    uint32_t    magic;
    uint8_t     type;
    uint8_t     transport;  ///< IBV_QPT_RC or IBV_QPT_UC of the sender
    uint16_t    reserved;
    uint64_t    conn_id;    ///< chosen by the initiator, unique per iface
    uint32_t    qpn;        ///< sender's connected QP (REQ, REP)
    uint32_t    ud_qpn;     ///< sender's UD QP, for replies
    device_addr dev;        ///< sender's port
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
    /// Create a passive QP connected to the peer's qpn; return its number.
    ucs_status_t (*accept)(void *arg, const verbs::remote_port &peer,
                           uint32_t peer_qpn, ibv_qp **qp_p);
    /// Our REQ 'conn_id' was answered: connect the endpoint to peer_qpn.
    void (*established)(void *arg, uint64_t conn_id, uint32_t peer_qpn);
    /// Our REQ 'conn_id' got no answer within the timeout.
    void (*timed_out)(void *arg, uint64_t conn_id);
    /// A passive QP is about to be destroyed (the peer disconnected); may
    /// be null.
    void (*released)(void *arg, ibv_qp *qp);
};

/// Owns the UD QP of one interface. Not thread safe (one interface, one
/// thread at a time, as UCT requires).
class conn_manager {
public:
    conn_manager() = default;
    ~conn_manager();
    conn_manager(const conn_manager &)            = delete;
    conn_manager &operator=(const conn_manager &) = delete;

    /// channel: completion channel for wakeup (may be null). A peer
    /// interface holds at most iface->settings.max_peer_conns passive QPs
    /// here; limit_var names that setting in the warning a refusal prints.
    [[nodiscard]] ucs_status_t init(zv_iface *iface, ibv_qp_type transport,
                                    const conn_callbacks &cb, double timeout_sec,
                                    ibv_comp_channel *channel, const char *limit_var);

    ibv_cq *cq() const { return m_cq; }
    /// Poll completions into a stash for the next progress(); true if any.
    bool peek();

    uint32_t ud_qpn() const { return m_qp->qp_num; }

    /// Start connecting: send REQ for conn_id to the peer's UD QP.
    [[nodiscard]] ucs_status_t start(uint64_t conn_id, const device_addr &peer,
                                     uint32_t peer_ud_qpn, uint32_t local_qpn);
    /// Forget conn_id (endpoint destroyed before it was established).
    void stop(uint64_t conn_id);
    /// Tell the peer an established connection is gone (best effort).
    void disconnect(uint64_t conn_id, const device_addr &peer, uint32_t peer_ud_qpn);

    /// Handle incoming messages and retransmissions. Returns events handled.
    unsigned progress();

    bool busy() const { return !m_connecting.empty(); }
    size_t passive_count() const { return m_passive.size(); }
    /// Messages dropped because they did not come from the interface they
    /// name, and connection requests refused by the per-peer limit.
    uint64_t spoofed() const { return m_spoofed; }
    uint64_t refused() const { return m_refused; }
    /// Times the connection QP was reset after entering the error state.
    uint64_t resets() const { return m_resets; }

private:
    using clock = std::chrono::steady_clock;

    struct connecting {
        device_addr       peer;
        uint32_t          peer_ud_qpn;
        uint32_t          local_qpn;
        clock::time_point next_try;
        clock::time_point deadline;
        clock::duration   backoff;
    };
    // Passive side: (peer gid, peer UD qpn, conn_id) -> our passive QP.
    using passive_key = std::tuple<std::vector<uint8_t>, uint32_t, uint64_t>;
    // A peer interface: (gid, UD qpn) -> its passive QPs here.
    using peer_key = std::pair<std::vector<uint8_t>, uint32_t>;

    void post_recv(unsigned index);
    void handle(const conn_msg &msg);
    bool from_sender(const ibv_wc &wc, const char *grh, const conn_msg &msg) const;
    ucs_status_t send(const device_addr &peer, uint32_t peer_ud_qpn,
                      const conn_msg &msg);
    ucs_status_t ah_for(const device_addr &peer, ibv_ah **ah_p);
    conn_msg make_msg(uint8_t type, uint64_t conn_id, uint32_t qpn) const;
    void poll_send();
    unsigned handle_wcs(const ibv_wc *wc, int n);
    /// A completion failed: if the QP is in the error state, stop posting
    /// until everything flushed, then reset it (recover()).
    void note_error(const ibv_wc &wc);
    void recover();
    unsigned check_timers();

    static constexpr unsigned rx_count  = 64;
    static constexpr unsigned rx_size   = 40 + 256; // GRH + message
    static constexpr uint32_t qkey      = 0x1a2b3c4d;

    zv_iface                          *m_iface   = nullptr;
    ibv_qp_type                        m_transport = IBV_QPT_RC;
    conn_callbacks                     m_cb      = {};
    clock::duration                    m_timeout = {};
    ibv_cq                            *m_cq      = nullptr;
    ibv_qp                            *m_qp      = nullptr;
    char                              *m_rx_mem  = nullptr;
    ibv_mr                            *m_rx_mr   = nullptr;
    unsigned                           m_tx_outstanding = 0;
    unsigned                           m_rx_posted = 0;
    /// The UD QP is in the error state (a send failed while the port was
    /// down): nothing is posted until it is reset.
    bool                               m_broken = false;
    uint64_t                           m_resets = 0;
    std::map<uint64_t, connecting>     m_connecting;
    std::map<passive_key, ibv_qp *>    m_passive;
    std::map<peer_key, unsigned>       m_per_peer;
    const char                        *m_limit_var = "";
    uint64_t                           m_spoofed = 0;
    uint64_t                           m_refused = 0;
    bool                               m_warned  = false;
    std::map<std::vector<uint8_t>, ibv_ah *> m_ahs;
    ibv_wc                             m_stash[16];
    int                                m_stash_count = 0;
};

} // namespace zv::iface

#endif
