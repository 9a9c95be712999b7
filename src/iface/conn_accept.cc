// SPDX-License-Identifier: BSD-3-Clause
// Connection manager: answering a peer's connection request (a new passive
// QP, a duplicate, an adopted QP confirmed, crossing requests paired; see
// conn.h).
#include "iface/conn.h"

#include <ucs/debug/log_def.h>

#include <utility>

namespace zv::iface {

void conn_manager::handle_req(const conn_msg &msg)
{
    const uint32_t their = msg.qpn & 0xffffff;
    peer_key pk(gid_key(msg.dev), msg.ud_qpn);
    if (msg.peer_qpn != 0) {
        // The peer adopted the QP it connected to one of ours: confirm it.
        channel *ch = find(msg.peer_qpn, msg);
        if (ch == nullptr) {
            ucs_debug("qp 0x%x: connection request for unknown qp 0x%x", m_qp->qp_num,
                      msg.peer_qpn);
            return; // the peer's endpoint times out
        }
        uint32_t q = ch->qp->qp_num;
        if (ch->remote_qpn == 0) {
            // Our own REP is still to come: this says the same.
            if (!ch->connecting || (connect(*ch, their, msg.rd_atomic) != UCS_OK)) {
                return;
            }
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, q, 0));
            finish(q);
            return;
        }
        if (ch->remote_qpn == their) {
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, q, 0));
        }
        return;
    }
    auto r = m_by_remote.find(remote_key(pk.first, pk.second, their));
    if (r != m_by_remote.end()) {
        // A duplicate: answer again.
        (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, r->second, 0));
        return;
    }
    const int order = compare(msg);
    if (m_share && (order == 0)) {
        // An endpoint to its own interface (UCP's to its own worker): its
        // QP is connected to itself, as rc_verbs does.
        channel *own = find(their, msg);
        if ((own != nullptr) && own->connecting && (own->remote_qpn == 0) &&
            (connect(*own, their, msg.rd_atomic) == UCS_OK)) {
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, their, 0));
            finish(their);
            return;
        }
    }
    if (m_share && (order != 0)) {
        channel *mine = fresh_connecting(pk);
        if ((mine != nullptr) && (order < 0)) {
            ucs_debug("qp 0x%x: crossing connection requests with UD qp 0x%x: the peer "
                      "pairs them", m_qp->qp_num, msg.ud_qpn);
            return; // answered once the peer answered ours
        }
        if ((mine != nullptr) && (connect(*mine, their, msg.rd_atomic) == UCS_OK)) {
            // Ours is connected to theirs; theirs is once our REP arrives.
            // Ours is ready once the peer answers its request, sent again
            // now as a confirmation (naming their QP).
            (void)send(msg.dev, msg.ud_qpn,
                       make_msg(conn_msg::rep, msg.conn_id, mine->qp->qp_num, 0));
            if (mine->queued) {
                send_first(*mine); // (its entry in m_queued is skipped)
            } else {
                resend(*mine);
            }
            return;
        }
        // (Ours could not be connected: the peer gets a passive QP instead.)
    }
    auto per_peer    = m_per_peer.find(pk);
    const unsigned n = (per_peer != m_per_peer.end()) ? per_peer->second : 0;
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
    verbs::qp qp;
    if (m_cb.accept(m_cb.arg, to_remote(msg.dev, msg.rd_atomic), their, &qp) != UCS_OK) {
        return; // logged by accept; the peer retries
    }
    // Its entries before anything else: out of memory undoes them and
    // drops this REQ (the QP is destroyed with 'qp'); the peer sends it
    // again, as after a lost packet. (No entry for its remote key: looked
    // up above.)
    const uint32_t qpn   = qp->qp_num;
    const remote_key rk(pk.first, pk.second, their);
    channel *ch          = nullptr;
    const ucs_status_t status = util::try_alloc([&] {
        ch = &m_channels[qpn];
        m_by_remote.emplace(rk, qpn);
        if (m_share) {
            m_unused[pk].insert(qpn);
        }
        m_idle.insert(qpn);
        ++m_per_peer[pk];
    });
    if (status != UCS_OK) {
        m_channels.erase(qpn);
        m_by_remote.erase(rk);
        auto u = m_unused.find(pk);
        if ((u != m_unused.end()) && (u->second.erase(qpn) > 0) && u->second.empty()) {
            m_unused.erase(u);
        }
        m_idle.erase(qpn);
        ucs_debug("qp 0x%x: no memory to accept a connection from UD qp 0x%x",
                  m_qp->qp_num, msg.ud_qpn);
        return;
    }
    ch->peer        = msg.dev;
    ch->peer_ud_qpn = msg.ud_qpn;
    ch->qp          = std::move(qp);
    ch->remote_qpn  = their;
    ch->passive     = true;
    ch->next_probe  = clock::now() + m_timeout; // (in m_idle: make_idle())
    (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::rep, msg.conn_id, qpn, 0));
}

} // namespace zv::iface
