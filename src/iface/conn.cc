// SPDX-License-Identifier: BSD-3-Clause
// Connection handshake over the interface's UD QP (slow path).
#include "iface/conn.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <cstdlib>

namespace zv::iface {

namespace {

constexpr uint64_t send_wr_id = ~0ull;
constexpr unsigned grh_len    = 40;

std::vector<uint8_t> gid_key(const device_addr &a)
{
    return std::vector<uint8_t>(a.gid, a.gid + sizeof(a.gid));
}

verbs::remote_port to_remote(const device_addr &a)
{
    verbs::remote_port r;
    r.is_roce = (a.flags & 1) != 0;
    r.lid     = a.lid;
    std::memcpy(r.gid.raw, a.gid, sizeof(a.gid));
    return r;
}

} // namespace

conn_manager::~conn_manager()
{
    for (auto &p : m_passive) {
        verbs::destroy_qp(p.second);
    }
    verbs::destroy_qp(m_qp);
    for (auto &a : m_ahs) {
        if (ibv_destroy_ah(a.second) != 0) {
            ucs_warn("ibv_destroy_ah() failed: %m");
        }
    }
    if ((m_cq != nullptr) && (ibv_destroy_cq(m_cq) != 0)) {
        ucs_warn("ibv_destroy_cq(connection cq) failed: %m");
    }
    if ((m_rx_mr != nullptr) && (ibv_dereg_mr(m_rx_mr) != 0)) {
        ucs_warn("ibv_dereg_mr(connection buffers) failed: %m");
    }
    std::free(m_rx_mem);
}

ucs_status_t conn_manager::init(zv_iface *iface, ibv_qp_type transport,
                                const conn_callbacks &cb, double timeout_sec,
                                ibv_comp_channel *channel, const char *limit_var)
{
    m_iface     = iface;
    m_limit_var = limit_var;
    m_transport = transport;
    m_cb        = cb;
    m_timeout   = std::chrono::duration_cast<clock::duration>(
            std::chrono::duration<double>(timeout_sec));

    const verbs::device &dev = iface->md->dev;
    m_cq = ibv_create_cq(dev.ctx(), rx_count + 64, nullptr, channel, 0);
    if (m_cq == nullptr) {
        ucs_error("%s: ibv_create_cq(connection) failed: %m", dev.name().c_str());
        return UCS_ERR_NO_RESOURCE;
    }
    ucs_status_t status = verbs::create_ud_qp(dev, *iface->port, m_cq, m_cq, 64,
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
    int ret = ibv_post_recv(m_qp, &wr, &bad);
    if (ret != 0) {
        ucs_error("qp 0x%x: ibv_post_recv() failed: %s", m_qp->qp_num, strerror(ret));
        return;
    }
    ++m_rx_posted;
}

void conn_manager::note_error(const ibv_wc &wc)
{
    if (!m_broken && verbs::qp_in_error(m_qp)) {
        m_broken = true;
        ucs_diag("%s: connection qp 0x%x entered the error state (%s): reset once its "
                 "work has flushed", m_iface->md->dev.name().c_str(), m_qp->qp_num,
                 ibv_wc_status_str(wc.status));
    }
}

void conn_manager::recover()
{
    if ((m_tx_outstanding > 0) || (m_rx_posted > 0)) {
        return; // flushes still to come
    }
    if (verbs::reset_ud_qp(m_qp, *m_iface->port, qkey) != UCS_OK) {
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

conn_msg conn_manager::make_msg(uint8_t type, uint64_t conn_id, uint32_t qpn) const
{
    conn_msg msg  = {};
    msg.magic     = conn_msg::magic_value;
    msg.type      = type;
    msg.transport = static_cast<uint8_t>(m_transport);
    msg.conn_id   = conn_id;
    msg.qpn       = qpn;
    msg.ud_qpn    = m_qp->qp_num;
    get_device_address(&m_iface->super.super,
                       reinterpret_cast<uct_device_addr_t *>(&msg.dev));
    return msg;
}

ucs_status_t conn_manager::ah_for(const device_addr &peer, ibv_ah **ah_p)
{
    auto key = gid_key(peer);
    key.push_back(static_cast<uint8_t>(peer.lid));
    key.push_back(static_cast<uint8_t>(peer.lid >> 8));
    auto it = m_ahs.find(key);
    if (it != m_ahs.end()) {
        *ah_p = it->second;
        return UCS_OK;
    }
    ibv_ah *ah;
    ucs_status_t status = verbs::create_ah(m_iface->md->dev, *m_iface->port,
                                           to_remote(peer), &ah);
    if (status != UCS_OK) {
        return status;
    }
    m_ahs.emplace(std::move(key), ah);
    *ah_p = ah;
    return UCS_OK;
}

void conn_manager::poll_send()
{
    // Only called when the send queue is nearly full: drain completions.
    ibv_wc wc[16];
    int n = ibv_poll_cq(m_cq, 16, wc);
    (void)handle_wcs(wc, n);
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
    int ret = ibv_post_send(m_qp, &wr, &bad);
    if (ret != 0) {
        ucs_error("qp 0x%x: ibv_post_send(connection message) failed: %s",
                  m_qp->qp_num, strerror(ret));
        return verbs::status_from_errno(ret);
    }
    ++m_tx_outstanding;
    return UCS_OK;
}

ucs_status_t conn_manager::start(uint64_t conn_id, const device_addr &peer,
                                 uint32_t peer_ud_qpn, uint32_t local_qpn)
{
    auto now = clock::now();
    connecting c;
    c.peer        = peer;
    c.peer_ud_qpn = peer_ud_qpn;
    c.local_qpn   = local_qpn;
    c.backoff     = std::chrono::milliseconds(100);
    c.next_try    = now + c.backoff;
    c.deadline    = now + m_timeout;
    m_connecting[conn_id] = c;
    // A failed first send is retried by the timer.
    (void)send(peer, peer_ud_qpn, make_msg(conn_msg::req, conn_id, local_qpn));
    return UCS_OK;
}

void conn_manager::stop(uint64_t conn_id)
{
    m_connecting.erase(conn_id);
}

void conn_manager::disconnect(uint64_t conn_id, const device_addr &peer,
                              uint32_t peer_ud_qpn)
{
    (void)send(peer, peer_ud_qpn, make_msg(conn_msg::disc, conn_id, 0));
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
    case conn_msg::req: {
        passive_key key{gid_key(msg.dev), msg.ud_qpn, msg.conn_id};
        auto it = m_passive.find(key);
        ibv_qp *qp;
        if (it != m_passive.end()) {
            qp = it->second; // duplicate REQ: answer again
        } else {
            unsigned &n = m_per_peer[peer_key(std::get<0>(key), msg.ud_qpn)];
            if (n >= m_iface->settings.max_peer_conns) {
                ++m_refused;
                if (!m_warned) {
                    m_warned = true;
                    ucs_warn("qp 0x%x: peer interface (UD qp 0x%x) asks for more than "
                             "%s=%u connections: refusing it (said once)",
                             m_qp->qp_num, msg.ud_qpn, m_limit_var,
                             m_iface->settings.max_peer_conns);
                }
                return; // the peer's endpoint times out (CONN_TIMEOUT)
            }
            if (m_cb.accept(m_cb.arg, to_remote(msg.dev), msg.qpn & 0xffffff, &qp) !=
                UCS_OK) {
                if (n == 0) {
                    m_per_peer.erase(peer_key(std::get<0>(key), msg.ud_qpn));
                }
                return; // logged by accept; the peer retries
            }
            ++n;
            m_passive.emplace(std::move(key), qp);
        }
        (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, qp->qp_num));
        break;
    }
    case conn_msg::rep: {
        auto it = m_connecting.find(msg.conn_id);
        if (it == m_connecting.end()) {
            return; // duplicate or stale
        }
        m_connecting.erase(it);
        m_cb.established(m_cb.arg, msg.conn_id, msg.qpn & 0xffffff);
        break;
    }
    case conn_msg::disc: {
        auto it = m_passive.find(passive_key{gid_key(msg.dev), msg.ud_qpn, msg.conn_id});
        if (it != m_passive.end()) {
            if (m_cb.released != nullptr) {
                m_cb.released(m_cb.arg, it->second);
            }
            verbs::destroy_qp(it->second);
            auto pk = peer_key(std::get<0>(it->first), msg.ud_qpn);
            m_passive.erase(it);
            auto pit = m_per_peer.find(pk);
            if ((pit != m_per_peer.end()) && (--pit->second == 0)) {
                m_per_peer.erase(pit);
            }
        }
        break;
    }
    default:
        ucs_debug("qp 0x%x: dropped connection message of unknown type %u",
                  m_qp->qp_num, msg.type);
    }
}

bool conn_manager::peek()
{
    if (m_stash_count == 0) {
        int n         = ibv_poll_cq(m_cq, 16, m_stash);
        m_stash_count = (n > 0) ? n : 0;
    }
    return m_stash_count > 0;
}

unsigned conn_manager::progress()
{
    ibv_wc wc[16];
    unsigned count = 0;
    if (m_stash_count > 0) {
        int n         = m_stash_count;
        m_stash_count = 0;
        count += handle_wcs(m_stash, n);
    }
    int n = ibv_poll_cq(m_cq, 16, wc);
    count += handle_wcs(wc, n);
    if (__builtin_expect(m_broken, 0)) {
        recover();
    }
    count += check_timers();
    return count;
}

unsigned conn_manager::handle_wcs(const ibv_wc *wc, int n)
{
    unsigned count = 0;
    for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id == send_wr_id) {
            --m_tx_outstanding;
            if (wc[i].status != IBV_WC_SUCCESS) {
                note_error(wc[i]);
            }
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

unsigned conn_manager::check_timers()
{
    unsigned count = 0;
    if (!m_connecting.empty()) {
        auto now = clock::now();
        for (auto it = m_connecting.begin(); it != m_connecting.end();) {
            connecting &c = it->second;
            uint64_t id   = it->first;
            ++it; // the callback may erase id
            if (now >= c.deadline) {
                m_connecting.erase(id);
                m_cb.timed_out(m_cb.arg, id);
            } else if (now >= c.next_try) {
                c.backoff  = std::min<clock::duration>(c.backoff * 2,
                                                       std::chrono::seconds(1));
                c.next_try = now + c.backoff;
                (void)send(c.peer, c.peer_ud_qpn,
                           make_msg(conn_msg::req, id, c.local_qpn));
                ++count;
            }
        }
    }
    return count;
}

} // namespace zv::iface
