// SPDX-License-Identifier: BSD-3-Clause
// Connection handshake over the interface's UD QP (slow path).
#include "iface/conn.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

namespace zv::iface {

namespace {

constexpr uint64_t send_wr_id = ~0ull;
constexpr unsigned grh_len    = 40;

} // namespace

conn_manager::~conn_manager()
{
    shutdown();
}

void conn_manager::shutdown()
{
    // Every QP before the CQs it uses (the UD QP's here, the transport's
    // after this returns); the AHs before the md's PD.
    m_channels.clear();
    m_qp.reset();
    m_ahs.clear();
    m_cq.reset();
    if ((m_rx_mr != nullptr) && (ibv_dereg_mr(m_rx_mr) != 0)) {
        ucs_warn("ibv_dereg_mr(connection buffers) failed: %m");
    }
    m_rx_mr = nullptr;
    std::free(m_rx_mem);
    m_rx_mem = nullptr;
    m_connecting.clear();
    m_closing.clear();
    set_busy(false);
    m_idle.clear();
    m_by_remote.clear();
    m_unused.clear();
    m_per_peer.clear();
    m_in_flight.clear();
    m_queued.clear();
    m_tx_outstanding = 0;
    m_rx_posted      = 0;
    m_probes         = 0;
    m_stash_count    = 0;
}

ucs_status_t conn_manager::init(zv_iface *iface, ibv_qp_type transport,
                                const conn_callbacks &cb, double timeout_sec,
                                ibv_comp_channel *channel, const char *limit_var,
                                bool share, uint8_t rd_atomic)
{
    m_iface     = iface;
    m_share     = share;
    m_rd_atomic = rd_atomic;
    m_limit_var = limit_var;
    m_transport = transport;
    m_cb        = cb;
    m_timeout   = std::chrono::duration_cast<clock::duration>(
            std::chrono::duration<double>(timeout_sec));
    get_device_address(&iface->super.super, reinterpret_cast<uct_device_addr_t *>(&m_self));

    const verbs::device &dev = iface->md->dev;
    m_cq.reset(ibv_create_cq(dev.ctx(), rx_count + 64, nullptr, channel, 0));
    if (!m_cq) {
        ucs_error("%s: ibv_create_cq(connection) failed: %m", dev.name().c_str());
        return UCS_ERR_NO_RESOURCE;
    }
    ucs_status_t status = verbs::create_ud_qp(dev, *iface->port, m_cq.get(), m_cq.get(), 64,
                                              rx_count, sizeof(conn_msg), qkey,
                                              &m_qp);
    if (status != UCS_OK) {
        return status;
    }
    m_rx_mem = static_cast<char *>(std::calloc(rx_count, rx_size));
    if (m_rx_mem == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    m_rx_mr = ibv_reg_mr(dev.pd(), m_rx_mem, rx_count * rx_size,
                         IBV_ACCESS_LOCAL_WRITE);
    if (m_rx_mr == nullptr) {
        ucs_error("%s: ibv_reg_mr(connection buffers) failed: %m",
                  dev.name().c_str());
        return UCS_ERR_NO_RESOURCE;
    }
    for (unsigned i = 0; i < rx_count; ++i) {
        post_recv(i);
    }
    return UCS_OK;
}

void conn_manager::post_recv(unsigned index)
{
    if (m_broken) {
        return; // all of them again after the reset
    }
    ibv_sge sge  = {};
    sge.addr     = reinterpret_cast<uintptr_t>(m_rx_mem + index * rx_size);
    sge.length   = rx_size;
    sge.lkey     = m_rx_mr->lkey;
    ibv_recv_wr wr = {};
    wr.wr_id     = index;
    wr.sg_list   = &sge;
    wr.num_sge   = 1;
    ibv_recv_wr *bad;
    int ret = ibv_post_recv(m_qp.get(), &wr, &bad);
    if (ret != 0) {
        ucs_error("qp 0x%x: ibv_post_recv() failed: %s", m_qp->qp_num, strerror(ret));
        return;
    }
    ++m_rx_posted;
}

void conn_manager::note_error(const ibv_wc &wc)
{
    if (!m_broken && verbs::qp_in_error(m_qp.get())) {
        m_broken = true;
        ucs_diag("%s: connection qp 0x%x entered the error state (%s): reset once its "
                 "work has flushed", m_iface->md->dev.name().c_str(), m_qp->qp_num,
                 ibv_wc_status_str(wc.status));
    }
}

void conn_manager::recover()
{
    if (m_tx_outstanding > 0) {
        return; // flushes still to come
    }
    if (m_rx_posted > 0) {
        // (receives posted as the QP failed may wait for a second flush)
        verbs::flush_receives(m_qp.get(), &m_flush_kicked, ucs_time_from_msec(10));
        return;
    }
    if (verbs::reset_ud_qp(m_qp.get(), *m_iface->port, qkey) != UCS_OK) {
        return; // tried again on the next progress
    }
    m_broken = false;
    ++m_resets;
    for (unsigned i = 0; i < rx_count; ++i) {
        post_recv(i);
    }
    ucs_diag("%s: connection qp 0x%x reset: connecting again",
             m_iface->md->dev.name().c_str(), m_qp->qp_num);
}

conn_msg conn_manager::make_msg(uint8_t type, uint64_t conn_id, uint32_t qpn,
                                uint32_t peer_qpn) const
{
    conn_msg msg  = {};
    msg.magic     = conn_msg::magic_value;
    msg.type      = type;
    msg.transport = static_cast<uint8_t>(m_transport);
    msg.conn_id   = conn_id;
    msg.qpn       = qpn;
    msg.ud_qpn    = m_qp->qp_num;
    msg.peer_qpn  = peer_qpn;
    msg.dev       = m_self;
    msg.rd_atomic = m_rd_atomic;
    return msg;
}

ucs_status_t conn_manager::ah_for(const device_addr &peer, ibv_ah **ah_p)
{
    const port_key_t key = port_key(peer);
    auto it              = m_ahs.find(key);
    if (it != m_ahs.end()) {
        *ah_p = it->second.get();
        return UCS_OK;
    }
    verbs::ah ah;
    ucs_status_t status = verbs::create_ah(m_iface->md->dev, *m_iface->port,
                                           to_remote(peer), &ah);
    if (status != UCS_OK) {
        return status;
    }
    ibv_ah *const made = ah.get();
    status = util::try_alloc([&] { m_ahs.emplace(key, std::move(ah)); });
    if (status != UCS_OK) {
        // (the handle is destroyed here; the message is sent again later)
        ucs_debug("qp 0x%x: no memory for an address handle's entry", m_qp->qp_num);
        return status;
    }
    *ah_p = made;
    return UCS_OK;
}

bool conn_manager::send_done(const ibv_wc &wc)
{
    if (wc.wr_id != send_wr_id) {
        return false;
    }
    --m_tx_outstanding;
    if (wc.status != IBV_WC_SUCCESS) {
        note_error(wc);
    }
    return true;
}

void conn_manager::poll_send()
{
    // Only called when the send queue is nearly full, from send(), which
    // runs inside the handling of messages and timers (stop_connecting()
    // walking its queue, a callback of the transport's). The CQ carries
    // received messages too: handled here, they would change that state
    // under its caller (a connection finished inside another's
    // stop_connecting() freed the queue entry it was walking). So they are
    // kept, in order, for the next progress().
    const int room = static_cast<int>(std::size(m_stash)) - m_stash_count;
    if (room <= 0) {
        return; // send() answers NO_RESOURCE: the timer sends again
    }
    ibv_wc wc[std::size(m_stash)];
    int n = ibv_poll_cq(m_cq.get(), room, wc);
    for (int i = 0; i < n; ++i) {
        if (!send_done(wc[i])) {
            m_stash[m_stash_count++] = wc[i];
            set_busy(true);
        }
    }
}

ucs_status_t conn_manager::send(const device_addr &peer, uint32_t peer_ud_qpn,
                                const conn_msg &msg)
{
    ibv_ah *ah;
    ucs_status_t status = ah_for(peer, &ah);
    if (status != UCS_OK) {
        return status;
    }
    if (m_broken) {
        return UCS_ERR_NO_RESOURCE; // retried by the timer once reset
    }
    if (m_tx_outstanding >= 60) {
        poll_send();
        if (m_tx_outstanding >= 60) {
            return UCS_ERR_NO_RESOURCE; // retried by the timer
        }
    }
    ibv_sge sge          = {};
    sge.addr             = reinterpret_cast<uintptr_t>(&msg);
    sge.length           = sizeof(msg);
    ibv_send_wr wr       = {};
    wr.wr_id             = send_wr_id;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = peer_ud_qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr *bad;
    int ret = ibv_post_send(m_qp.get(), &wr, &bad);
    if (ret != 0) {
        ucs_error("qp 0x%x: ibv_post_send(connection message) failed: %s",
                  m_qp->qp_num, strerror(ret));
        return verbs::status_from_errno(ret);
    }
    ++m_tx_outstanding;
    return UCS_OK;
}

ibv_qp *conn_manager::claim(const device_addr &peer, uint32_t peer_ud_qpn)
{
    if (!m_share) {
        return nullptr;
    }
    auto it = m_unused.find(peer_key(gid_key(peer), peer_ud_qpn));
    if (it == m_unused.end()) {
        return nullptr;
    }
    ibv_qp *qp = nullptr;
    std::vector<uint32_t> dead;
    for (auto q = it->second.begin(); (q != it->second.end()) && (qp == nullptr);) {
        channel &ch = m_channels.at(*q);
        if (verbs::qp_in_error(ch.qp.get())) {
            // Its peer is gone, or the port failed. (Out of memory: it
            // stays, and its probe or the next claim() destroys it.)
            if (util::try_alloc([&] { dead.push_back(*q); }) != UCS_OK) {
                ++q;
                continue;
            }
        } else if (!ch.probing) { // (a probe WR would overfill its send queue)
            ch.owned = true;
            end_asking(ch); // (the peer's answer no longer matters)
            m_idle.erase(*q);
            qp = ch.qp.get();
        } else {
            ++q;
            continue;
        }
        q = it->second.erase(q);
    }
    if (it->second.empty()) {
        m_unused.erase(it);
    }
    for (uint32_t q : dead) {
        destroy(q);
    }
    return qp;
}

ibv_qp *conn_manager::take(verbs::qp qp, const device_addr &peer, uint32_t peer_ud_qpn)
{
    ibv_qp *used = qp.get();
    channel *c   = nullptr;
    if (util::try_alloc([&] { c = &m_channels[used->qp_num]; }) != UCS_OK) {
        ucs_error("qp 0x%x: no memory to connect qp 0x%x", m_qp->qp_num, used->qp_num);
        return nullptr; // (qp is destroyed on return)
    }
    channel &ch    = *c;
    ch.peer        = peer;
    ch.peer_ud_qpn = peer_ud_qpn;
    ch.qp          = std::move(qp);
    ch.owned       = true;
    return used;
}

ucs_status_t conn_manager::start(uint64_t conn_id, ibv_qp *qp)
{
    channel &ch = m_channels.at(qp->qp_num); // from take() or claim()
    peer_key pk(gid_key(ch.peer), ch.peer_ud_qpn);
    // The entries first: out of memory leaves the manager as it was (an
    // empty queue or a count of 0 left behind is what stop_connecting()
    // finds after the last one anyway).
    bool queued = false;
    const ucs_status_t status = util::try_alloc([&] {
        m_connecting[conn_id] = qp->qp_num;
        m_in_flight.try_emplace(pk, 0);
        queued = in_flight(pk) >= req_window;
        if (queued) {
            m_queued[pk].push_back(qp->qp_num);
        }
    });
    if (status != UCS_OK) {
        m_connecting.erase(conn_id);
        ucs_error("qp 0x%x: no memory to connect qp 0x%x", m_qp->qp_num, qp->qp_num);
        return status;
    }
    ch.conn_id    = conn_id;
    ch.connecting = true;
    set_busy(true);
    if (!queued) {
        send_first(ch);
    } else {
        ch.queued   = true;
        ch.next_try = clock::time_point::max();
    }
    return UCS_OK;
}

unsigned conn_manager::in_flight(const peer_key &pk) const
{
    auto f = m_in_flight.find(pk);
    return (f != m_in_flight.end()) ? f->second : 0;
}

void conn_manager::send_first(channel &ch)
{
    const peer_key pk(gid_key(ch.peer), ch.peer_ud_qpn);
    auto f = m_in_flight.find(pk);
    if (f != m_in_flight.end()) {
        ++f->second;
    } else {
        // (Out of memory: the REQ goes uncounted, one more in flight than
        // the window allows. The window only spares the peer a burst.)
        (void)util::try_alloc([&] { m_in_flight.emplace(pk, 1u); });
    }
    ch.queued   = false;
    ch.backoff  = std::chrono::milliseconds(100);
    ch.next_try = clock::now() + ch.backoff;
    ch.deadline = clock::time_point::max(); // armed by check_timers()
    resend(ch); // a failed send is retried by the timer
}

void conn_manager::stop_connecting(channel &ch)
{
    m_connecting.erase(ch.conn_id);
    ch.connecting = false;
    peer_key pk(gid_key(ch.peer), ch.peer_ud_qpn);
    if (ch.queued) {
        ch.queued = false; // its entry in m_queued is skipped
        return;
    }
    auto f = m_in_flight.find(pk);
    if ((f != m_in_flight.end()) && (f->second > 0)) {
        --f->second;
    }
    auto q = m_queued.find(pk);
    while ((q != m_queued.end()) && !q->second.empty() && (in_flight(pk) < req_window)) {
        uint32_t next = q->second.front();
        q->second.pop_front();
        auto it = m_channels.find(next);
        if ((it != m_channels.end()) && it->second.queued && it->second.connecting) {
            send_first(it->second);
        }
    }
    if ((q != m_queued.end()) && q->second.empty()) {
        m_queued.erase(q);
    }
    f = m_in_flight.find(pk);
    if ((f != m_in_flight.end()) && (f->second == 0)) {
        m_in_flight.erase(f);
    }
}

void conn_manager::resend(const channel &ch)
{
    uint8_t type = ch.connecting ? conn_msg::req : conn_msg::disc;
    uint64_t id  = ch.connecting ? ch.conn_id : 0;
    (void)send(ch.peer, ch.peer_ud_qpn, make_msg(type, id, ch.qp->qp_num, ch.remote_qpn));
}

void conn_manager::destroy(uint32_t qpn)
{
    auto it = m_channels.find(qpn);
    if (it == m_channels.end()) {
        return;
    }
    channel &ch = it->second;
    peer_key pk(gid_key(ch.peer), ch.peer_ud_qpn);
    if (ch.remote_qpn != 0) {
        auto r = m_by_remote.find(remote_key(pk.first, pk.second, ch.remote_qpn));
        if ((r != m_by_remote.end()) && (r->second == qpn)) {
            m_by_remote.erase(r);
        }
    }
    if (ch.connecting) {
        stop_connecting(ch);
    }
    end_asking(ch);
    m_idle.erase(qpn);
    if (ch.probing) {
        ch.doomed = true; // its probe WR completes first (probe_done)
        return;
    }
    auto u = m_unused.find(pk);
    if ((u != m_unused.end()) && (u->second.erase(qpn) > 0) && u->second.empty()) {
        m_unused.erase(u);
    }
    if (ch.passive) {
        auto p = m_per_peer.find(pk);
        if ((p != m_per_peer.end()) && (--p->second == 0)) {
            m_per_peer.erase(p);
        }
    }
    ucs_debug("qp 0x%x: destroying connected qp 0x%x (peer's 0x%x at UD qp 0x%x)",
              m_qp->qp_num, qpn, ch.remote_qpn, ch.peer_ud_qpn);
    verbs::qp qp = std::move(ch.qp); // destroyed last, once its transport heard
    m_channels.erase(it);
    if (m_cb.released != nullptr) {
        m_cb.released(m_cb.arg, qp.get());
    }
}

ucs_status_t conn_manager::connect(channel &ch, uint32_t remote_qpn, uint8_t rd_atomic)
{
    // Its entry first: out of memory leaves the QP as it was, and the
    // peer's next message tries again.
    const remote_key key(gid_key(ch.peer), ch.peer_ud_qpn, remote_qpn);
    const uint32_t qpn = ch.qp->qp_num;
    uint32_t prev      = 0;
    ucs_status_t status = util::try_alloc([&] {
        auto r = m_by_remote.try_emplace(key, qpn);
        if (!r.second) {
            prev              = r.first->second;
            r.first->second   = qpn;
        }
    });
    if (status != UCS_OK) {
        ucs_debug("qp 0x%x: no memory to connect qp 0x%x", m_qp->qp_num, qpn);
        return status;
    }
    status = m_cb.connect(m_cb.arg, ch.qp.get(), to_remote(ch.peer, rd_atomic), remote_qpn);
    if (status != UCS_OK) {
        auto r = m_by_remote.find(key);
        if (prev != 0) {
            r->second = prev;
        } else {
            m_by_remote.erase(r);
        }
        return status;
    }
    ch.remote_qpn = remote_qpn;
    ch.rd_atomic  = rd_atomic;
    return UCS_OK;
}

ucs_status_t conn_manager::reconnect(uint32_t qpn, ibv_qp **qp_p)
{
    auto it = m_channels.find(qpn);
    if ((it == m_channels.end()) || (it->second.remote_qpn == 0) || it->second.doomed) {
        return UCS_ERR_NO_ELEM;
    }
    channel &ch   = it->second;
    ibv_qp_attr a = {};
    a.qp_state    = IBV_QPS_RESET;
    int ret       = ibv_modify_qp(ch.qp.get(), &a, IBV_QP_STATE);
    if (ret != 0) {
        ucs_error("qp 0x%x: modify to RESET failed: %s", qpn, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    ucs_status_t status = m_cb.connect(m_cb.arg, ch.qp.get(), to_remote(ch.peer, ch.rd_atomic),
                                       ch.remote_qpn);
    if (status != UCS_OK) {
        return status;
    }
    *qp_p = ch.qp.get();
    return UCS_OK;
}

void conn_manager::finish(uint32_t qpn)
{
    channel &ch = m_channels.at(qpn);
    uint64_t id = ch.conn_id;
    stop_connecting(ch);
    if (!ch.owned) {
        // Its endpoint left while it was connecting. (Out of memory: no
        // DISC, the peer's probe finds its end gone.)
        if (!begin_close(ch)) {
            destroy(qpn);
        }
        return;
    }
    m_cb.established(m_cb.arg, id, ch.remote_qpn);
}

void conn_manager::fail(uint32_t qpn, ucs_status_t status, const char *why)
{
    channel &ch = m_channels.at(qpn);
    uint64_t id = ch.conn_id;
    stop_connecting(ch);
    if (!ch.owned) {
        destroy(qpn);
        return;
    }
    m_cb.failed(m_cb.arg, id, status, why); // its endpoint releases the QP
}

conn_manager::channel *conn_manager::find(uint32_t qpn, const conn_msg &from)
{
    auto it = m_channels.find(qpn);
    if ((it == m_channels.end()) || (it->second.peer_ud_qpn != from.ud_qpn) ||
        (std::memcmp(it->second.peer.gid, from.dev.gid, sizeof(from.dev.gid)) != 0)) {
        return nullptr;
    }
    return &it->second;
}

conn_manager::channel *conn_manager::fresh_connecting(const peer_key &peer)
{
    for (auto &c : m_connecting) { // by conn_id: the oldest first
        channel &ch = m_channels.at(c.second);
        if ((ch.remote_qpn == 0) && (ch.peer_ud_qpn == peer.second) &&
            (gid_key(ch.peer) == peer.first)) {
            return &ch;
        }
    }
    return nullptr;
}

int conn_manager::compare(const conn_msg &msg) const
{
    int cmp = std::memcmp(m_self.gid, msg.dev.gid, sizeof(m_self.gid));
    if (cmp != 0) {
        return cmp;
    }
    return (m_qp->qp_num > msg.ud_qpn) - (m_qp->qp_num < msg.ud_qpn);
}

/// A message is taken only from the interface it names: its UD QP sent it
/// and (when the device delivers a GRH) from the GID it claims. Replies go
/// where a message says, so this keeps a third party from pointing them at
/// someone else or from tearing down someone else's connection.
bool conn_manager::from_sender(const ibv_wc &wc, const char *grh, const conn_msg &msg) const
{
    return ((wc.src_qp & 0xffffff) == (msg.ud_qpn & 0xffffff)) &&
           (((wc.wc_flags & IBV_WC_GRH) == 0) || grh_source_matches(grh, msg.dev.gid));
}

void conn_manager::handle(const conn_msg &msg)
{
    switch (msg.type) {
    case conn_msg::req:
        handle_req(msg);
        break;
    case conn_msg::rep: {
        auto it = m_connecting.find(msg.conn_id);
        if (it == m_connecting.end()) {
            return; // duplicate or stale
        }
        uint32_t q  = it->second;
        channel *ch = find(q, msg);
        if (ch == nullptr) {
            return; // not from the interface we asked
        }
        uint32_t their = msg.qpn & 0xffffff;
        if (ch->remote_qpn != 0) {
            // An adopted QP: the peer confirms the QP it is connected to.
            if (ch->remote_qpn != their) {
                fail(q, UCS_ERR_UNREACHABLE, "the peer answered with another queue pair");
                return;
            }
        } else if (connect(*ch, their, msg.rd_atomic) != UCS_OK) {
            fail(q, UCS_ERR_IO_ERROR, "cannot connect the endpoint's queue pair");
            return;
        }
        finish(q);
        break;
    }
    case conn_msg::disc:
    case conn_msg::ack:
    case conn_msg::done:
        handle_close(msg);
        break;
    default:
        ucs_debug("qp 0x%x: dropped connection message of unknown type %u",
                  m_qp->qp_num, msg.type);
    }
}

bool conn_manager::peek()
{
    if (m_stash_count == 0) {
        int n         = ibv_poll_cq(m_cq.get(), 16, m_stash);
        m_stash_count = (n > 0) ? n : 0;
    }
    return m_stash_count > 0;
}

unsigned conn_manager::progress()
{
    ibv_wc wc[16];
    unsigned count = 0;
    if (m_stash_count > 0) {
        // (Copied out: handling them may stash more, from poll_send().)
        const int kept = m_stash_count;
        std::copy(m_stash, m_stash + kept, wc);
        m_stash_count = 0;
        count += handle_wcs(wc, kept);
    }
    int n = ibv_poll_cq(m_cq.get(), 16, wc);
    count += handle_wcs(wc, n);
    if (__builtin_expect(m_broken, 0)) {
        recover();
    }
    count += check_timers();
    // A full batch means more are likely queued (a burst of requests): poll
    // on every progress until the queue is drained, as while connections
    // open or close.
    set_busy((n == 16) || (m_stash_count > 0) || !m_connecting.empty() || !m_closing.empty());
    return count;
}

unsigned conn_manager::handle_wcs(const ibv_wc *wc, int n)
{
    unsigned count = 0;
    for (int i = 0; i < n; ++i) {
        if (send_done(wc[i])) {
            continue;
        }
        --m_rx_posted;
        unsigned index = static_cast<unsigned>(wc[i].wr_id);
        conn_msg msg;
        const char *grh = m_rx_mem + index * rx_size;
        if ((wc[i].status == IBV_WC_SUCCESS) && (wc[i].byte_len >= grh_len) &&
            parse_conn_msg(grh + grh_len, wc[i].byte_len - grh_len, m_transport, &msg)) {
            if (from_sender(wc[i], grh, msg)) {
                handle(msg);
                ++count;
            } else {
                ++m_spoofed;
                ucs_debug("qp 0x%x: dropped a connection message naming UD qp 0x%x, "
                          "sent by qp 0x%x", m_qp->qp_num, msg.ud_qpn, wc[i].src_qp);
            }
        } else if (wc[i].status == IBV_WC_SUCCESS) {
            ucs_debug("qp 0x%x: dropped a malformed connection message", m_qp->qp_num);
        } else {
            ucs_debug("qp 0x%x: connection receive failed: %s", m_qp->qp_num,
                      ibv_wc_status_str(wc[i].status));
            note_error(wc[i]);
        }
        post_recv(index);
    }
    return count;
}

void conn_manager::fail_peer(const channel &ch, uint32_t qpn)
{
    // The peer's interface did not answer: the REQs waiting their turn for
    // it fail with this one (each would wait a CONN_TIMEOUT of its own).
    // (Out of memory: only this one fails now, the queued ones at their
    // own deadlines.)
    std::vector<uint32_t> doomed;
    auto q = m_queued.find(peer_key(gid_key(ch.peer), ch.peer_ud_qpn));
    if ((q != m_queued.end()) &&
        (util::try_alloc([&] { doomed.assign(q->second.begin(), q->second.end()); }) !=
         UCS_OK)) {
        doomed.clear();
    }
    // Last: failing it sends the next queued one.
    if (util::try_alloc([&] { doomed.push_back(qpn); }) != UCS_OK) {
        fail(qpn, UCS_ERR_ENDPOINT_TIMEOUT, "no answer from the peer's interface");
        return;
    }
    for (uint32_t d : doomed) {
        // Callbacks may have destroyed any of them meanwhile.
        auto it = m_channels.find(d);
        if ((it != m_channels.end()) && it->second.connecting) {
            fail(d, UCS_ERR_ENDPOINT_TIMEOUT, "no answer from the peer's interface");
        }
    }
}

unsigned conn_manager::check_timers()
{
    if (m_connecting.empty() && m_closing.empty() && m_idle.empty()) {
        return 0;
    }
    auto now = clock::now();
    if (!m_idle.empty() && (now >= m_next_scan)) {
        start_probes(now);
    }
    // Retransmissions back off from 100 ms: a scan every 20 ms is enough
    // (thousands of connections being set up are not walked per progress).
    if (now < m_next_check) {
        return 0;
    }
    m_next_check = now + std::chrono::milliseconds(20);
    // Due ones first: the callbacks may start, release or destroy others.
    // (Out of memory: this scan is skipped, the next one tries again.)
    std::vector<uint32_t> due;
    if (util::try_alloc([&] { due.reserve(m_connecting.size() + m_closing.size()); }) !=
        UCS_OK) {
        return 0;
    }
    for (const auto &c : m_connecting) {
        channel &ch = m_channels.at(c.second);
        if (ch.queued) {
            continue;
        }
        if (ch.deadline == clock::time_point::max()) {
            // CONN_TIMEOUT counts from the first progress after the REQ
            // went out: not the time the application spent creating
            // thousands of endpoints without progress.
            ch.deadline = now + m_timeout;
        }
        if (now >= ch.next_try) {
            due.push_back(c.second);
        }
    }
    for (uint32_t q : m_closing) {
        if (now >= m_channels.at(q).next_try) {
            due.push_back(q);
        }
    }
    unsigned count = 0;
    for (uint32_t q : due) {
        auto it = m_channels.find(q);
        if ((it == m_channels.end()) || !(it->second.connecting || it->second.closing)) {
            continue;
        }
        channel &ch = it->second;
        ++count;
        if (now >= ch.deadline) {
            if (ch.connecting) {
                fail_peer(ch, q);
            } else {
                m_reclaimed += ch.asking;
                ucs_debug("qp 0x%x: no answer to DISC from UD qp 0x%x: the peer is gone", q,
                          ch.peer_ud_qpn);
                destroy(q);
            }
            continue;
        }
        ch.backoff  = std::min<clock::duration>(ch.backoff * 2, std::chrono::seconds(1));
        ch.next_try = now + ch.backoff;
        resend(ch);
    }
    return count;
}

} // namespace zv::iface
