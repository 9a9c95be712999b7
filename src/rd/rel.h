// SPDX-License-Identifier: BSD-3-Clause
// Software reliability for unreliable transports: the per-connection state
// machine (sequence numbers, window, cumulative acks, retransmission, peer
// timeout), independent of verbs so it can be driven by a lossy test channel.
#ifndef ZV_RD_REL_H
#define ZV_RD_REL_H

#include <cstdint>

namespace zv::rel {

/*
 * The protocol (go-back-N with cumulative acknowledgements):
 *
 * - Every reliable packet of a connection carries a 16-bit sequence number
 *   (psn), consecutive from 0. The receiver delivers only the next expected
 *   psn, so delivery is exactly once and in order; an older psn is a
 *   duplicate (dropped, and re-acknowledged at once because the sender
 *   evidently missed the ack); a newer one means a gap (dropped, and one NAK
 *   per gap asks the sender to go back now instead of at its timeout).
 * - The receiver acknowledges cumulatively (ack_psn = last psn delivered):
 *   piggybacked on its own traffic when there is some, otherwise in a
 *   stand-alone ACK after 'ack_every' deliveries or 'ack_delay' time, or
 *   at once when the sender asks for it (a packet whose completion someone
 *   waits for, one that fills the window, a flush): then nobody waits for
 *   ack_delay.
 * - The sender keeps at most 'window' unacknowledged packets (the transport
 *   keeps their buffers for retransmission: memory is bounded by the
 *   window). With packets outstanding it runs one timer: when it expires,
 *   every unacknowledged packet is sent again and the timeout doubles, up
 *   to rto_max. When nothing has come from the peer for 'peer_timeout' (no
 *   ack, not even one that acknowledges nothing new: heard()), the peer is
 *   declared dead.
 * - Of the window, the sender keeps at most 'cwnd' packets in flight (a
 *   congestion window): a loss (a timeout or a NAK) halves it, down to
 *   min_cwnd, and every ack that releases packets grows it by one, up to
 *   the window (additive increase, multiplicative decrease, as UCX's ud). A go-back resends only what fits in it; the acks of the resent
 *   packets let the rest go. Without it, many connections into one
 *   receiver that lost a packet each resent whole windows at once, lost
 *   more, and starved each other's resends past the peer timeout (UCX's
 *   test_uct_pending.pending_fairness: 128 endpoints, 636,328 packets
 *   resent of 868,819 posted).
 * - The timeout follows the measured round trip (RFC 6298: srtt + 4 rttvar,
 *   at least rto_init, at most rto_max), so a slow path (an emulated or
 *   loaded host) does not resend a whole window that is merely late. A
 *   round trip is sampled from the newest packet an ack releases, never
 *   from one a timeout sent twice (Karn: the ack may be the first copy's),
 *   and until such a sample arrives a backed-off timeout stays backed off.
 *   A NAK proves the head was missing, so a go-back restarts the clocks of
 *   what it resends.
 * - psn comparisons are modulo 2^16; window <= max_window keeps them
 *   unambiguous (a psn is never compared with one 2^15 away).
 *
 * Time is an abstract monotonic tick count chosen by the caller (UCX time
 * in the transport, virtual nanoseconds in tests); all settings are in the
 * same unit. Not thread safe: one connection is used by one thread at a time.
 */

using psn_t = uint16_t;

/// a comes before b (modulo 2^16).
constexpr bool psn_before(psn_t a, psn_t b)
{
    return static_cast<int16_t>(static_cast<psn_t>(a - b)) < 0;
}

constexpr unsigned max_window = 16384;
/// The congestion window's floor (UCX's ud: 2).
constexpr unsigned min_cwnd = 2;

/// Deliveries before a stand-alone ack is due, for a window: a quarter of
/// it, so the sender never stalls on a full window for want of an ack.
constexpr unsigned ack_every_for(unsigned window) { return (window >= 4) ? window / 4 : 1; }

struct settings {
    unsigned window       = 256;  ///< unacknowledged packets, 1..max_window
    uint64_t rto_init     = 0;    ///< first retransmission timeout
    uint64_t rto_max      = 0;    ///< cap of the doubling timeout
    uint64_t peer_timeout = 0;    ///< no ack progress this long: peer dead
    unsigned ack_every    = ack_every_for(256); ///< deliveries before an ack is due
    uint64_t ack_delay    = 0;    ///< time before a delayed ack is due
};

/// Base of the transport's send descriptor: the sender links and numbers
/// packets; the transport owns their memory.
struct tx_pkt {
    tx_pkt  *next;
    uint64_t sent_at; ///< first transmission (round-trip samples)
    psn_t    psn;
};

/// Sending half of a connection.
class sender {
public:
    enum class timer_result : uint8_t { idle, wait, resend, failed };

    void init(const settings *s, psn_t first_psn = 0)
    {
        m_s        = s;
        m_next     = first_psn;
        m_rto      = s->rto_init;
        m_rto_base = s->rto_init;
        m_cwnd     = s->window;
    }

    bool idle() const { return m_head == nullptr; }
    /// The whole window again: what was lost so far says nothing of the
    /// path (a connection request resent while the peer was not there).
    void open_cwnd() { m_cwnd = m_s->window; }
    bool window_full() const { return m_count >= m_cwnd; }
    unsigned cwnd() const { return m_cwnd; }
    /// 'p' (in the window) is within the congestion window: it may go out.
    bool in_cwnd(const tx_pkt *p) const
    {
        return static_cast<psn_t>(p->psn - m_head->psn) < m_cwnd;
    }
    unsigned outstanding() const { return m_count; }
    psn_t next_psn() const { return m_next; }
    tx_pkt *head() const { return m_head; }
    uint64_t deadline() const { return m_deadline; }
    /// The timeout after progress: from the measured round trip.
    uint64_t rto_base() const { return m_rto_base; }
    /// Smoothed round trip (0 before the first sample).
    uint64_t srtt() const { return m_srtt; }

    /// Number 'p' with the next psn and keep it until acknowledged. The
    /// caller checked window_full().
    psn_t push(tx_pkt *p, uint64_t now)
    {
        p->psn     = m_next++;
        p->next    = nullptr;
        p->sent_at = now;
        if (m_head == nullptr) {
            m_head        = p;
            m_progress_at = now;
            m_deadline    = now + m_rto;
        } else {
            m_tail->next = p;
        }
        m_tail = p;
        ++m_count;
        return p->psn;
    }

    /// Cumulative ack: every psn up to and including 'ack' arrived.
    /// release(tx_pkt *) is called for each packet that leaves the window,
    /// in psn order. Acks that are stale, or that acknowledge a psn never
    /// sent (a broken or hostile peer), change nothing. Returns the number
    /// of packets released.
    template <class Release>
    [[gnu::always_inline]] unsigned ack(psn_t ack, uint64_t now, Release &&release)
    {
        if ((m_head == nullptr) || psn_before(ack, m_head->psn) ||
            !psn_before(ack, m_next)) {
            return 0;
        }
        unsigned n = 0;
        psn_t last = 0;
        uint64_t sent_at = 0;
        while ((m_head != nullptr) && !psn_before(ack, m_head->psn)) {
            tx_pkt *p = m_head;
            m_head    = p->next;
            --m_count;
            ++n;
            last    = p->psn;
            sent_at = p->sent_at;
            release(p); // may free p
        }
        if (m_head == nullptr) {
            m_tail = nullptr;
        }
        if (!m_karn || !psn_before(last, m_karn_psn)) {
            m_karn = false; // past every packet that was sent twice
            sample(now - sent_at);
            m_rto = m_rto_base;
        }
        m_cwnd += (m_cwnd < m_s->window) ? 1 : 0;
        m_progress_at = now;
        m_deadline    = now + m_rto;
        return n;
    }

    /// The peer saw a gap after 'ack': acknowledge up to it, then true when
    /// the caller should send the whole window again now. One go-back per
    /// head psn: a repeated NAK for the same gap waits for the timer.
    template <class Release>
    bool nak(psn_t ack_psn, uint64_t now, Release &&release)
    {
        ack(ack_psn, now, release);
        if ((m_head == nullptr) || (m_nak_valid && (m_nak_head == m_head->psn))) {
            return false;
        }
        m_nak_valid = true;
        m_nak_head  = m_head->psn;
        m_deadline  = now + m_rto;
        lost();
        // The receiver lacks the head: what goes out now is what it will
        // acknowledge, so the resend time is the one to measure from.
        for (tx_pkt *p = m_head; p != nullptr; p = p->next) {
            p->sent_at = now;
        }
        m_karn = false;
        return true;
    }

    /// A packet from the peer's receive connection (an ack, even one that
    /// acknowledges nothing new): the peer is alive. It may hold back what
    /// we send (its application computes, its buffers are full), but it
    /// is not dead: the peer timeout counts from here too.
    void heard(uint64_t now)
    {
        if (m_head != nullptr) {
            m_progress_at = now;
        }
    }

    /// What the window holds was not sent until now (it waited for the
    /// connection): its timers start now.
    void start(uint64_t now)
    {
        for (tx_pkt *p = m_head; p != nullptr; p = p->next) {
            p->sent_at = now;
        }
        if (m_head != nullptr) {
            m_progress_at = now;
            m_deadline    = now + m_rto;
        }
    }

    /// The local port is back after an outage: the peer gets a whole
    /// peer_timeout from now, and the window goes out again at the next
    /// timer check, at the first timeout.
    void restart(uint64_t now)
    {
        if (m_head != nullptr) {
            m_progress_at = now;
            m_rto         = m_rto_base;
            m_deadline    = now;
            m_nak_valid   = false;
        }
    }

    /// Check the retransmission timer. 'resend': send every packet in the
    /// window again (head() onwards); 'failed': the peer has not made
    /// progress for peer_timeout.
    timer_result on_timer(uint64_t now)
    {
        if (m_head == nullptr) {
            return timer_result::idle;
        }
        if (now < m_deadline) {
            return timer_result::wait;
        }
        if (now - m_progress_at >= m_s->peer_timeout) {
            return timer_result::failed;
        }
        m_rto       = (m_rto * 2 > m_s->rto_max) ? m_s->rto_max : m_rto * 2;
        m_deadline  = now + m_rto;
        m_nak_valid = false;
        resent();
        lost();
        return timer_result::resend;
    }

    /// Drop every packet (connection failed or destroyed), in psn order.
    template <class Release>
    void purge(Release &&release)
    {
        while (m_head != nullptr) {
            tx_pkt *p = m_head;
            m_head    = p->next;
            release(p);
        }
        m_tail  = nullptr;
        m_count = 0;
    }

private:
    /// A packet was lost: fewer in flight.
    void lost()
    {
        const unsigned floor = (m_s->window < min_cwnd) ? m_s->window : min_cwnd;
        m_cwnd               = (m_cwnd / 2 > floor) ? m_cwnd / 2 : floor;
    }

    /// Everything outstanding goes out again: no round-trip sample from it.
    void resent()
    {
        m_karn     = true;
        m_karn_psn = m_next;
    }

    void sample(uint64_t rtt)
    {
        if (m_srtt == 0) {
            m_srtt   = (rtt > 0) ? rtt : 1;
            m_rttvar = rtt / 2;
        } else {
            uint64_t err = (rtt > m_srtt) ? rtt - m_srtt : m_srtt - rtt;
            m_rttvar     = (3 * m_rttvar + err) / 4;
            m_srtt       = (7 * m_srtt + rtt) / 8;
            m_srtt       = (m_srtt > 0) ? m_srtt : 1;
        }
        uint64_t rto = m_srtt + 4 * m_rttvar;
        m_rto_base   = (rto < m_s->rto_init) ? m_s->rto_init :
                       (rto > m_s->rto_max)  ? m_s->rto_max  : rto;
    }

    const settings *m_s           = nullptr;
    tx_pkt         *m_head        = nullptr;
    tx_pkt         *m_tail        = nullptr;
    unsigned        m_count       = 0;
    unsigned        m_cwnd        = 0;
    psn_t           m_next        = 0;
    psn_t           m_nak_head    = 0;
    bool            m_nak_valid   = false;
    uint64_t        m_rto         = 0;
    uint64_t        m_rto_base    = 0;
    uint64_t        m_srtt        = 0;
    uint64_t        m_rttvar      = 0;
    psn_t           m_karn_psn    = 0;
    bool            m_karn        = false;
    uint64_t        m_deadline    = 0;
    uint64_t        m_progress_at = 0;
};

/// Receiving half of a connection.
class receiver {
public:
    enum class verdict : uint8_t { deliver, duplicate, gap };

    void init(const settings *s, psn_t first_psn = 0)
    {
        m_s        = s;
        m_expected = first_psn;
    }

    /// A reliable packet with 'psn' arrived: deliver it (the next in
    /// order), or drop it as a duplicate or as beyond a gap. 'ack_req': the
    /// sender asks for the ack now.
    verdict on_data(psn_t psn, uint64_t now, bool ack_req = false)
    {
        if (psn == m_expected) {
            ++m_expected;
            if (m_unacked++ == 0) {
                m_ack_deadline = now + m_s->ack_delay;
            }
            m_ack_now = m_ack_now || ack_req;
            // A NAK still waiting to go out covers the gap behind this
            // packet too: no second one for it.
            m_nak_sent = m_nak_now;
            return verdict::deliver;
        }
        if (psn_before(psn, m_expected)) {
            m_ack_now = true;
            return verdict::duplicate;
        }
        if (!m_nak_sent) {
            m_nak_now  = true;
            m_nak_sent = true;
        }
        return verdict::gap;
    }

    /// Last psn delivered: what an ack carries.
    psn_t ack_psn() const { return static_cast<psn_t>(m_expected - 1); }
    psn_t expected() const { return m_expected; }

    /// A NAK should go out (a gap was seen since the last one).
    bool nak_due() const { return m_nak_now; }
    /// An ack should go out now.
    bool ack_due(uint64_t now) const
    {
        return m_ack_now || (m_unacked >= m_s->ack_every) ||
               ((m_unacked > 0) && (now >= m_ack_deadline));
    }
    /// Something is owed to the sender (an ack or a NAK), now or later.
    bool owes() const { return m_ack_now || m_nak_now || (m_unacked > 0); }
    uint64_t ack_deadline() const { return m_ack_deadline; }

    /// The sender asks where the stream stands (it waits for its window
    /// to drain): an ack is due now, even if the last one already left
    /// (it may have been lost).
    void request_ack() { m_ack_now = true; }

    /// An ack (or NAK) carrying ack_psn() left: nothing is owed any more.
    void acked()
    {
        m_unacked = 0;
        m_ack_now = false;
        m_nak_now = false;
    }

private:
    const settings *m_s            = nullptr;
    psn_t           m_expected     = 0;
    unsigned        m_unacked      = 0;
    bool            m_ack_now      = false;
    bool            m_nak_now      = false;
    bool            m_nak_sent     = false;
    uint64_t        m_ack_deadline = 0;
};

} // namespace zv::rel

#endif
