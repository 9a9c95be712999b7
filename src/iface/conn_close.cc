// SPDX-License-Identifier: BSD-3-Clause
// Connection manager: closing connections (DISC, ACK, DONE) and the QPs no
// local endpoint uses, probed and reclaimed (see conn.h).
#include "iface/conn.h"

#include <ucs/debug/log_def.h>

namespace zv::iface {

void conn_manager::release(ibv_qp *qp)
{
    if (qp == nullptr) {
        return;
    }
    auto it = m_channels.find(qp->qp_num);
    if ((it == m_channels.end()) || (it->second.qp.get() != qp)) {
        return; // not the manager's: take() and claim() give only its own
    }
    channel &ch = it->second;
    ch.owned    = false;
    ch.released = true;
    if (ch.queued) {
        stop_connecting(ch); // its REQ never left: the peer knows nothing of it
        destroy(qp->qp_num);
        return;
    }
    if (ch.remote_qpn == 0) {
        if (!ch.connecting) {
            destroy(qp->qp_num); // its connection failed: nothing at the peer uses it
        }
        return; // a fresh REQ is unanswered: closed once answered (finish)
    }
    if (ch.connecting) {
        stop_connecting(ch);
    }
    if (!begin_close(ch)) {
        destroy(qp->qp_num); // (no DISC: the peer's probe finds its end gone)
    }
}

bool conn_manager::begin_close(channel &ch)
{
    if (util::try_alloc([&] { m_closing.insert(ch.qp->qp_num); }) != UCS_OK) {
        return false;
    }
    auto now    = clock::now();
    ch.closing  = true;
    ch.backoff  = std::chrono::milliseconds(100);
    ch.next_try = now + ch.backoff;
    ch.deadline = now + m_timeout;
    set_busy(true);
    ucs_debug("qp 0x%x: closing connected qp 0x%x (peer's 0x%x)", m_qp->qp_num,
              ch.qp->qp_num, ch.remote_qpn);
    resend(ch);
    return true;
}

bool conn_manager::make_idle(channel &ch)
{
    if (util::try_alloc([&] { m_idle.insert(ch.qp->qp_num); }) != UCS_OK) {
        return false;
    }
    ch.next_probe = clock::now() + m_timeout;
    return true;
}

void conn_manager::end_asking(channel &ch)
{
    if (ch.asking) {
        ch.asking = false;
        --m_probes;
    }
    if (ch.closing) {
        ch.closing = false;
        m_closing.erase(ch.qp->qp_num);
    }
}

void conn_manager::start_probes(clock::time_point now)
{
    // A quarter of the probe interval between scans: each unused QP is
    // probed between one and 1.25 conn_timeouts after its last probe.
    m_next_scan = now + m_timeout / 4;
    for (uint32_t q : m_idle) {
        channel &ch = m_channels.at(q);
        if (m_probes >= max_probes) {
            break; // the rest at the next scan
        }
        if (ch.probing || ch.closing || (now < ch.next_probe)) {
            continue;
        }
        if (m_cb.probe == nullptr) {
            // Does the peer still use its end? (see conn.h; out of memory:
            // asked at the next scan)
            if (begin_close(ch)) {
                ch.asking = true;
                ++m_probes;
            }
        } else if (m_cb.probe(m_cb.arg, ch.qp.get()) == UCS_OK) {
            ch.probing = true;
            ++m_probes;
        }
    }
}

void conn_manager::probe_done(uint32_t qpn, bool ok)
{
    auto it = m_channels.find(qpn);
    if ((it == m_channels.end()) || !it->second.probing) {
        return;
    }
    channel &ch = it->second;
    --m_probes;
    ch.probing    = false;
    ch.next_probe = clock::now() + m_timeout;
    if (!ch.doomed && ok) {
        return; // the peer's end is there
    }
    if (!ch.doomed) {
        ++m_reclaimed;
        ucs_debug("qp 0x%x: probe of unused qp 0x%x failed: the peer (UD qp 0x%x) is gone",
                  m_qp->qp_num, qpn, ch.peer_ud_qpn);
    }
    destroy(qpn);
}

void conn_manager::handle_close(const conn_msg &msg)
{
    const uint32_t their = msg.qpn & 0xffffff;
    channel *ch          = find(msg.peer_qpn, msg);
    const uint32_t q     = (ch != nullptr) ? ch->qp->qp_num : 0;
    switch (msg.type) {
    case conn_msg::disc:
        if ((ch == nullptr) || (ch->remote_qpn != their)) {
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::done, 0, 0, their));
        } else if (ch->owned) {
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::ack, 0, q, their));
        } else {
            (void)send(msg.dev, msg.ud_qpn, make_msg(conn_msg::done, 0, q, their));
            destroy(q);
        }
        break;
    case conn_msg::ack:
        if ((ch == nullptr) || (ch->remote_qpn != their)) {
            break;
        }
        if (ch->closing) {
            // Our DISC arrived; the peer still uses its end and will say so.
            end_asking(*ch);
            if (!make_idle(*ch)) {
                destroy(q); // (out of memory: the peer's probe finds its end gone)
            }
        }
        break;
    default: // done: the peer has no end (any more)
        if ((ch != nullptr) && (ch->released || ch->asking) && !ch->owned &&
            ((their == 0) || (their == ch->remote_qpn))) {
            destroy(q);
        }
        break;
    }
}

} // namespace zv::iface
