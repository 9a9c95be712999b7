// SPDX-License-Identifier: BSD-3-Clause
// uc_zv: the reliable-datagram core on Unreliable Connected queue pairs.
#include "uc/uc_iface.h"

#include "rd/rd_progress_inl.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

namespace zv::uc {

/*
 * uc_zv is the reliable-datagram core (src/rd: sequence numbers, window,
 * acks, retransmission, peer timeout) carried by UC queue pairs. Connections are set up by the
 * connection manager rc_zv uses (src/iface/conn.h), with one QP for both
 * directions: the passive UC QP the peer's request creates here is adopted
 * by the first endpoint of ours towards that peer, as in rc_zv.
 *
 * So every connected QP carries up to two one-way streams, each with its
 * own reliability state: an endpoint's (rd_ep: its sends, and the acks for
 * them that come back) and a receive connection's (rx_conn: the peer's
 * sends, and the acks that go back). Every connected QP has a receive
 * connection from the moment it is connected; an endpoint is added when
 * one of ours uses it. A packet goes by its type: DATA and puts to the QP's
 * receive connection, ACK and NAK to its endpoint.
 *
 * Active messages are SENDs with rd_hdr in front. A put is an RDMA WRITE
 * with immediate data: UC drops a message that lost any packet, and the
 * immediate's receive completion exists only for a message that arrived
 * whole, so that completion (carrying the psn) is the put's reliable
 * packet. A put whose completion is dropped is written again when the
 * window goes back; writes are replayed in order, so the target ends with
 * the data of the last put, as if nothing was lost.
 */

namespace {

constexpr int qp_access = IBV_ACCESS_REMOTE_WRITE; // the peer's puts

/// A UC queue pair on the interface's CQs and SRQ, into *qp_p; *max_inline
/// (optional) is what the device granted.
ucs_status_t create_uc_qp(uc_iface *iface, verbs::qp *qp_p, unsigned *max_inline = nullptr)
{
    const rd_iface *rd = &iface->super;
    verbs::connected_qp_params p;
    p.type         = IBV_QPT_UC;
    p.max_send_wr  = rd->super.settings.tx_queue_len;
    p.max_send_sge = max_sge;
    p.max_inline   = rd->settings.max_inline;
    p.send_cq      = rd->send_cq.get();
    p.recv_cq      = rd->recv_cq.get();
    p.srq          = iface->srq.get();
    unsigned inl;
    return verbs::create_connected_qp(rd->super.md->dev, p, qp_p,
                                      (max_inline != nullptr) ? max_inline : &inl);
}

// ---------------------------------------------------------------- connections

/// On a connected QP the endpoint is the QP's: a piggybacked ack's
/// ack_dest only says that one is there.
constexpr uint32_t qp_ep_marker = 1;

/// Set what QP 'qpn' carries (both null: it is forgotten). False if memory
/// is short (nothing changed).
[[nodiscard]] bool set_qp(uc_iface *iface, uint32_t qpn, rx_conn *conn, rd_ep *ep)
{
    const qp_objs cur = iface->by_qp.find(qpn);
    if ((cur.conn == nullptr) && (cur.ep == nullptr)) {
        return ((conn == nullptr) && (ep == nullptr)) || iface->by_qp.add(qpn, {conn, ep});
    }
    if ((conn == nullptr) && (ep == nullptr)) {
        iface->by_qp.remove(qpn);
    } else {
        iface->by_qp.at(qpn) = {conn, ep};
    }
    if ((conn != nullptr) && (ep != nullptr)) {
        conn->partner = ep;
        ep->partner   = conn;
    }
    return true;
}

broken_qp *find_broken(uc_iface *iface, uint32_t qpn);
void forget_broken(uc_iface *iface, broken_qp *b);

void qp_released(void *arg, ibv_qp *qp)
{
    auto *iface = static_cast<uc_iface *>(arg);
    if (broken_qp *b = find_broken(iface, qp->qp_num)) {
        forget_broken(iface, b);
    }
    const qp_objs cur = iface->by_qp.find(qp->qp_num);
    if (cur.conn != nullptr) {
        (void)set_qp(iface, qp->qp_num, nullptr, cur.ep); // (never allocates)
        conn_free(&iface->super, cur.conn);
    }
}

/// The receive connection of a connected QP (the peer's sends on it).
ucs_status_t add_rx_conn(uc_iface *iface, ibv_qp *qp, uint32_t peer_qpn)
{
    const qp_objs cur = iface->by_qp.find(qp->qp_num);
    if (cur.conn != nullptr) {
        return UCS_OK;
    }
    if (iface->super.conns.full()) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    rx_conn *c = conn_alloc(&iface->super, 0);
    if (c == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    c->qp       = qp;
    c->peer_qpn = peer_qpn;
    c->peer_ep  = qp_ep_marker;
    if (!set_qp(iface, qp->qp_num, c, cur.ep)) {
        conn_free(&iface->super, c);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

ucs_status_t connect_ep_qp(void *arg, ibv_qp *qp, const verbs::remote_port &peer,
                           uint32_t peer_qpn)
{
    auto *iface         = static_cast<uc_iface *>(arg);
    ucs_status_t status = verbs::connect_qp(qp, *iface->super.super.port, peer, peer_qpn,
                                            qp_access, verbs::rc_timing{}, iface->resetting);
    return (status == UCS_OK) ? add_rx_conn(iface, qp, peer_qpn) : status;
}

ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer, uint32_t peer_qpn,
                            verbs::qp *qp_p)
{
    auto *iface = static_cast<uc_iface *>(arg);
    verbs::qp qp;
    ucs_status_t status = create_uc_qp(iface, &qp);
    if (status != UCS_OK) {
        return status;
    }
    status = connect_ep_qp(iface, qp.get(), peer, peer_qpn);
    if (status != UCS_OK) {
        qp_released(iface, qp.get()); // (then the QP goes, with its handle)
        return status;
    }
    *qp_p = std::move(qp);
    return UCS_OK;
}

void connection_established(void *arg, uint64_t conn_id, uint32_t peer_qpn)
{
    rd_ep *ep = static_cast<uc_iface *>(arg)->super.eps.find(conn_id);
    if ((ep == nullptr) || (ep->st != rd_ep::state::connecting)) {
        return;
    }
    ep->peer_conn = peer_qpn; // also says "the QP left RESET"
    if (find_broken(static_cast<uc_iface *>(arg), ep->qp->qp_num) != nullptr) {
        return; // (a claimed QP being reset: connected by reset_flushed())
    }
    ep_connected(ep);
}

void connection_failed(void *arg, uint64_t conn_id, ucs_status_t status, const char *why)
{
    rd_ep *ep = static_cast<uc_iface *>(arg)->super.eps.find(conn_id);
    if (ep != nullptr) {
        ep_fail(ep, status, why);
    }
}

// ---------------------------------------------------------------- endpoint

ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    worker_scope scope(&to_rd(params->iface)->as.gate);
    rd_ep *ep;
    ucs_status_t status = ep_new(params, &ep);
    if (status != UCS_OK) {
        return status;
    }
    uc_iface *iface = to_uc(ep->iface);
    // The QP the peer connected here for an endpoint of its own, if one is
    // unused: both directions then share it.
    ep->qp = iface->conn.claim(ep->peer, ep->peer_qpn);
    if (ep->qp == nullptr) {
        verbs::qp qp;
        status = create_uc_qp(iface, &qp);
        if (status != UCS_OK) {
            ep_discard(ep);
            return status;
        }
        ep->qp = iface->conn.take(std::move(qp), ep->peer, ep->peer_qpn);
        if (ep->qp == nullptr) {
            ep_discard(ep);
            return UCS_ERR_NO_MEMORY; // (logged by take)
        }
    }
    ep_register(ep);
    rx_conn *conn = iface->by_qp.find(ep->qp->qp_num).conn;
    status        = set_qp(iface, ep->qp->qp_num, conn, ep) ?
                    iface->conn.start(ep->id, ep->qp) :
                    UCS_ERR_NO_MEMORY;
    if (status != UCS_OK) {
        (void)set_qp(iface, ep->qp->qp_num, conn, nullptr);
        ep_release(ep);
        return status;
    }
    *ep_p = &ep->super.super;
    return UCS_OK;
}

void ep_destroy(uct_ep_h uct_ep)
{
    rd_ep *ep       = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    uc_iface *iface = to_uc(ep->iface);
    (void)set_qp(iface, ep->qp->qp_num, iface->by_qp.find(ep->qp->qp_num).conn, nullptr);
    // Not flushed: the peer may still send on the QP (its receive
    // connection here stays). The endpoint's unacknowledged descriptors are
    // released once its QP's send queue has passed them (settle_dropped),
    // and the QP goes back to the connection manager with the endpoint
    // (ep_freed), which closes it with the peer.
    ep_release(ep);
}

/// The connection manager closes the endpoint's QP with the peer.
void ep_freed(rd_ep *ep)
{
    to_uc(ep->iface)->conn.release(ep->qp);
}

// ---------------------------------------------------------------- receive, errors

/// An endpoint that was connected (also while its QP is reset: it holds
/// what it sends, and what the peer acknowledges is released).
bool takes_acks(const rd_ep *ep)
{
    return (ep != nullptr) && (ep->peer_conn != 0) && (ep->st != rd_ep::state::failed);
}

bool rx_packet(rd_iface *rd, const char *pkt, const ibv_wc &wc, iface::buffer *b)
{
    const qp_objs on = to_uc(rd)->by_qp.find(wc.qp_num);
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        parsed_pkt put = {};
        uint16_t psn;
        if (!decode_put_imm(ntohl(wc.imm_data), &psn, &put.ack_req) || (on.conn == nullptr)) {
            ++rd->bad_rx;
            return false;
        }
        put.hdr.psn = psn;
        ++rd->rx_puts;
        deliver_in_place(rd, on.conn, put, b);
        return false;
    }
    parsed_pkt p;
    if ((wc.opcode != IBV_WC_RECV) || (wc.wc_flags & IBV_WC_WITH_IMM) ||
        !parse_send(pkt, wc.byte_len, &p)) {
        ++rd->bad_rx;
        return false;
    }
    switch (p.hdr.type) {
    case rd_hdr::data:
        if (on.conn == nullptr) {
            ++rd->bad_rx;
            return false;
        }
        if (p.hdr.ack_dest != 0) { // the piggybacked ack of our endpoint's stream
            if (takes_acks(on.ep)) {
                ep_packet(on.ep, p.hdr, 0);
            } else {
                ++rd->bad_rx;
            }
        }
        return deliver_data(rd, on.conn, p, b);
    case rd_hdr::ack_req:
        if (on.conn == nullptr) {
            ++rd->bad_rx;
            return false;
        }
        ack_requested(rd, on.conn);
        return false;
    case rd_hdr::ack:
    case rd_hdr::nak:
        if (!takes_acks(on.ep)) {
            ++rd->bad_rx;
            return false;
        }
        ep_packet(on.ep, p.hdr, 0);
        return false;
    default:
        ++rd->bad_rx; // (parse_send() refused the rest)
        return false;
    }
}

/// uc_zv as the core's tenant: its progress is compiled for it
/// (rd_progress_inl.h), and a received packet goes straight to rx_packet().
struct tenant {
    static bool rx(rd_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b)
    {
        return rx_packet(iface, pkt, wc, b);
    }
    static constexpr size_t max_body = wire::max_body;
};

/*
 * A QP in the error state. A UC QP gets there only for a local reason: on
 * Soft-RoCE, a send while its port is down, or after the port is back but
 * before its address (and so its GID) is (local QP operation error). The
 * peer loses nothing by it: a UC responder drops a message that is cut
 * short and takes the next one that starts, whatever its PSN. So the QP is
 * brought back, keeping its number, and what was not acknowledged goes
 * again, as ud_zv does with its QP (ud_iface.cc):
 * 1. nothing more is posted to it: its endpoint holds what it sends in its
 *    window, as while connecting, and its receive connection its acks;
 * 2. a signaled marker is posted: the error state flushes it after every
 *    work request before it, so its completion says that nothing else is
 *    posted (the endpoint's unsignaled tail is accounted then); a destroyed
 *    endpoint that posted again meanwhile (settle_dropped) gets another;
 * 3. the QP goes RESET -> RTS towards the same peer QP, once the port and
 *    its GID are back, tried at most every reset_interval until it works
 *    (the route may return a moment after the GID);
 * 4. its endpoint is connected again: its window goes out.
 * A QP that keeps failing fails its endpoint within the peer timeout, as a
 * silent peer does (the endpoint's timer runs throughout).
 */

constexpr double reset_interval_sec = 0.1;

broken_qp *find_broken(uc_iface *iface, uint32_t qpn)
{
    for (broken_qp &b : iface->broken) {
        if (b.qpn == qpn) {
            return &b;
        }
    }
    return nullptr;
}

/// b is no longer being recovered (reset, or its QP gone).
void forget_broken(uc_iface *iface, broken_qp *b)
{
    iface->resets_due -= b->flushed ? 1 : 0;
    iface->broken.erase(iface->broken.begin() + (b - iface->broken.data()));
}

/// The endpoint that may still post on QP qpn: the QP's, or a destroyed one
/// waiting for its descriptors.
rd_ep *poster_of(uc_iface *iface, uint32_t qpn)
{
    rd_ep *ep = iface->by_qp.find(qpn).ep;
    if (ep != nullptr) {
        return ep;
    }
    for (rd_ep *dead : iface->super.graveyard) {
        if (dead->qp->qp_num == qpn) {
            return dead;
        }
    }
    return nullptr;
}

/// A signaled work request that the error state flushes after everything
/// posted before it.
bool post_marker(uc_iface *iface, ibv_qp *qp, broken_qp *b)
{
    rd_iface *rd    = &iface->super;
    ibv_send_wr wr  = {};
    wr.wr_id        = wr_id_ctl | wr_id_marker |
                      (static_cast<uint64_t>(rd->sq.unsignaled + 1) << wr_id_cover_shift);
    wr.opcode       = IBV_WR_SEND;
    wr.send_flags   = IBV_SEND_SIGNALED;
    ibv_send_wr *bad;
    if (ibv_post_send(qp, &wr, &bad) != 0) {
        return false;
    }
    posted_signaled(rd, &rd->sq);
    b->poster = poster_of(iface, b->qpn);
    b->posted = (b->poster != nullptr) ? b->poster->own_sq.posted : 0;
    return true;
}

/// The endpoint on QP qpn fails (its QP cannot be brought back).
void fail_qp(uc_iface *iface, uint32_t qpn, const char *why)
{
    rd_ep *ep = iface->by_qp.find(qpn).ep;
    if ((ep != nullptr) && (ep->st != rd_ep::state::failed)) {
        ep_fail(ep, UCS_ERR_IO_ERROR, why);
    }
}

/// A completion failed on QP qpn, or the device said it failed: if it is in
/// the error state, stop posting to it and flush it (steps 1 and 2).
void qp_broke(uc_iface *iface, uint32_t qpn, const char *why)
{
    if (find_broken(iface, qpn) != nullptr) {
        return; // (its work flushing behind the first error)
    }
    const qp_objs on = iface->by_qp.find(qpn);
    ibv_qp *qp       = (on.ep != nullptr) ? on.ep->qp : (on.conn != nullptr) ? on.conn->qp : nullptr;
    if ((qp == nullptr) || !verbs::qp_in_error(qp)) {
        return; // gone, or flushed before its QP was reset
    }
    bool ok = util::try_alloc([&] { iface->broken.push_back({}); }) == UCS_OK;
    if (ok) {
        iface->broken.back().qpn = qpn;
        ok = post_marker(iface, qp, &iface->broken.back());
        if (!ok) {
            iface->broken.pop_back();
        }
    }
    if (!ok) {
        fail_qp(iface, qpn, why);
        return;
    }
    if ((on.ep != nullptr) && (on.ep->st == rd_ep::state::connected)) {
        on.ep->st          = rd_ep::state::connecting; // (peer_conn stays: held)
        on.ep->resend_next = nullptr;
    }
    if (on.conn != nullptr) {
        on.conn->qp = nullptr;
    }
    ucs_diag("%s: uc_zv qp 0x%x entered the error state (%s): reset once its work has "
             "flushed", iface->super.super.md->dev.name().c_str(), qpn, why);
}

/// Step 3 and 4 for every flushed QP, if the port can take them now.
void reset_flushed(uc_iface *iface)
{
    rd_iface *rd         = &iface->super;
    const ucs_time_t now = ucs_get_time();
    if (rd->port_down || (now < iface->next_reset) ||
        !verbs::gid_present(rd->super.md->dev.ctx(), *rd->super.port)) {
        return; // (the port's return raises no event for the GID: tried again)
    }
    iface->next_reset = now + ucs_time_from_sec(reset_interval_sec);
    for (size_t i = 0; i < iface->broken.size();) {
        const broken_qp b = iface->broken[i];
        if (!b.flushed) {
            ++i;
            continue;
        }
        ibv_qp *qp;
        iface->resetting    = true;
        ucs_status_t status = iface->conn.reconnect(b.qpn, &qp);
        iface->resetting    = false;
        if ((status != UCS_OK) && (status != UCS_ERR_NO_ELEM)) {
            // The route may come back a moment after the GID ("Network is
            // unreachable"): next time. A peer gone for good fails the
            // endpoint by its peer timeout meanwhile.
            ucs_debug("%s: uc_zv qp 0x%x: reset failed (%s), trying again",
                      rd->super.md->dev.name().c_str(), b.qpn, ucs_status_string(status));
            ++i;
            continue;
        }
        forget_broken(iface, &iface->broken[i]);
        if (status != UCS_OK) {
            continue; // (gone: the connection manager closed it)
        }
        ++rd->qp_resets;
        const qp_objs on = iface->by_qp.find(b.qpn);
        if (on.conn != nullptr) {
            on.conn->qp = qp;
        }
        ucs_diag("%s: uc_zv qp 0x%x reset", rd->super.md->dev.name().c_str(), b.qpn);
        if ((on.ep != nullptr) && (on.ep->st == rd_ep::state::connecting) &&
            (on.ep->peer_conn != 0)) {
            ep_connected(on.ep); // (may call back: 'on' is not used after)
        }
    }
}

/// The marker on QP qpn completed: nothing earlier is posted there. Its
/// endpoint's unsignaled tail flushed before it, covered by no completion.
void qp_flushed(uc_iface *iface, uint32_t qpn)
{
    broken_qp *b = find_broken(iface, qpn);
    if ((b == nullptr) || b->flushed) {
        return;
    }
    rd_iface *rd = &iface->super;
    rd_ep *ep    = poster_of(iface, qpn);
    if ((ep != nullptr) && ((ep != b->poster) || (ep->own_sq.posted != b->posted))) {
        // posted to after the marker (a destroyed endpoint's descriptors)
        ibv_qp *qp = ep->qp;
        if (!post_marker(iface, qp, b)) {
            forget_broken(iface, b);
            fail_qp(iface, qpn, "its qp could not be flushed after an error");
        }
        return;
    }
    if (ep != nullptr) {
        send_queue &sq     = ep->own_sq;
        rd->tx_outstanding -= sq.unsignaled;
        rd->tx_silent      -= sq.unsignaled;
        sq.unsignaled       = 0;
        sq.done             = sq.posted;
    }
    b->flushed = true;
    ++iface->resets_due;
    iface->conn.wake(); // (progress resets it: reset_flushed)
}

void wc_error(rd_iface *rd, const ibv_wc &wc)
{
    if ((wc.wr_id & wr_id_ptr_mask) == (wr_id_ctl | wr_id_marker)) {
        qp_flushed(to_uc(rd), wc.qp_num);
        return;
    }
    char why[96];
    snprintf(why, sizeof(why), "send completion with error: %s",
             ibv_wc_status_str(wc.status));
    switch (wc.status) {
    case IBV_WC_LOC_QP_OP_ERR: // (no route: the port or its address is gone)
    case IBV_WC_WR_FLUSH_ERR:  // (the QP's first error was not a completion's)
    case IBV_WC_GENERAL_ERR:
        qp_broke(to_uc(rd), wc.qp_num, why);
        break;
    default: // what a resend cannot mend (a memory key, a length): as UCX's uc
        fail_qp(to_uc(rd), wc.qp_num, why);
        break;
    }
}

void qp_fatal(rd_iface *rd, uint32_t qpn)
{
    qp_broke(to_uc(rd), qpn, "its qp failed");
}

// ---------------------------------------------------------------- interface

/// Progress, as the worker and the async side run it (rd_async.h).
// (inline into progress(); the async side calls its own copy, Async)
template <bool Faults, bool Async = false>
[[gnu::always_inline]] inline unsigned progress_core(rd_iface *rd)
{
    uc_iface *iface = to_uc(rd);
    unsigned count  = progress_begin<tenant, Faults>(rd);
    // Connection traffic is rare: every 32nd call, or while connecting;
    // every call of the async side (a peer may be waiting to connect).
    // (progress_begin counts the calls)
    if (Async || iface->conn.busy() ||
        ((rd->progress_count.load(std::memory_order_relaxed) & 31) == 0)) {
        count += iface->conn.progress();
        if (__builtin_expect(iface->resets_due != 0, 0)) {
            reset_flushed(iface);
            iface->conn.wake(); // (until it is done)
        }
    }
    progress_end(rd);
    return count;
}

template <bool Faults> unsigned progress(uct_iface_h uct_iface)
{
    rd_iface *rd = to_rd(uct_iface);
    worker_scope scope(&rd->as.gate);
    return progress_core<Faults>(rd);
}

ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    ucs_status_t status = rd::iface_query(uct_iface, attr);
    if (status != UCS_OK) {
        return status;
    }
    uc_iface *iface       = to_uc(uct_iface);
    const unsigned write  = iface->settings.max_write;
    attr->cap.flags      |= UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY;
    attr->cap.put.max_short       = write;
    attr->cap.put.max_bcopy       = write;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = write;
    attr->cap.put.max_iov         = max_sge;
    attr->cap.put.opt_zcopy_align = 512;
    attr->cap.put.align_mtu       = iface->super.super.port->mtu_bytes;
    return UCS_OK;
}

/// Close, or undo an open that failed after open_begin(). The connection
/// manager's QPs (every connected QP) go before the SRQ and the CQs they
/// use, the SRQ before the CQs and before the MRs of the receive buffers
/// posted to it (the pools, destroyed with the interface). close_cqs()
/// destroys the CQs before iface::cleanup(), and the members would go after
/// it, pools first: hence the reset.
void iface_close(uct_iface_h uct_iface)
{
    uc_iface *iface = to_uc(uct_iface);
    rd_iface *rd    = &iface->super;
    async_close(rd); // before anything reads what the async side may touch
    rd->spoofed_rx    += iface->conn.spoofed();
    rd->refused_conns += iface->conn.refused();
    rd->qp_resets     += iface->conn.resets();
    rd->reclaimed     += iface->conn.reclaimed();
    close_begin(rd);
    close_eps(rd); // (their QPs go back to the connection manager)
    iface->conn.shutdown(); // every QP it set up
    iface->srq.reset();
    close_cqs(rd);
    iface::cleanup(&rd->super);
    delete iface;
}

bool idle(const rd_iface *rd)
{
    return !to_uc(rd)->conn.busy();
}

constexpr rd_transport uc_transport = {
    "uc_zv", "UCX_UC_ZV_", wc_error, qp_fatal, nullptr, ep_freed, true, idle,
};

constexpr uct_iface_ops_t make_ops()
{
    uct_iface_ops_t ops{};
    fill_ops(ops);
    ops.ep_create             = ep_create;
    ops.ep_destroy            = ep_destroy;
    ops.ep_put_short          = ep_put_short;
    ops.ep_put_bcopy          = ep_put_bcopy;
    ops.ep_put_zcopy          = ep_put_zcopy;
    ops.iface_query           = iface_query;
    ops.iface_progress_enable = rd::progress_enable;
    ops.iface_progress        = progress<false>; // or <true>: choose_progress()
    ops.iface_close           = iface_close;
    return ops;
}

constexpr uct_iface_ops_t uc_ops = make_ops();

/// Whether every message is kept within one packet (UCX_UC_ZV_ONE_PACKET,
/// auto resolved against the device); logs the choice.
bool one_packet(const uc_iface *iface)
{
    // A UC responder must take the first packet of a new message as a fresh
    // start when the previous message was cut short by a lost packet (the
    // class D1/E responder errors). Soft-RoCE does not: after a truncated message its
    // responder keeps the old opcode and drops every later message on that
    // QP (drivers/infiniband/sw/rxe/rxe_resp.c, check_op_seq and
    // do_class_d1e_error), so one lost packet silences the connection for
    // good. A message of one packet cannot be cut short, only lost whole.
    constexpr uint32_t rxe_vendor_id = 0xffffff;
    const iface::zv_iface &base = iface->super.super;
    const verbs::device &dev    = base.md->dev;
    const bool rxe = (dev.attr().orig_attr.vendor_id == rxe_vendor_id);
    const ucs_on_off_auto_value_t one = iface->settings.one_packet;
    const bool on  = (one == UCS_CONFIG_ON) || ((one == UCS_CONFIG_AUTO) && rxe);
    if (on) {
        ucs_diag("uc_zv %s: one packet per message (MTU %u)%s", dev.name().c_str(),
                 base.port->mtu_bytes,
                 (one == UCS_CONFIG_AUTO) ? ": Soft-RoCE drops all later messages after a truncated one" : "");
    }
    return on;
}

/// The SRQ, the connection manager, sizes.
ucs_status_t create_resources(uc_iface *iface)
{
    rd_iface *rd             = &iface->super;
    const verbs::device &dev = rd->super.md->dev;
    ibv_srq_init_attr srq_attr = {};
    srq_attr.attr.max_wr       = rd->super.settings.rx_queue_len;
    srq_attr.attr.max_sge      = 1;
    iface->srq.reset(ibv_create_srq(dev.pd(), &srq_attr));
    if (!iface->srq) {
        ucs_error("%s: ibv_create_srq(max_wr=%u) failed: %m", dev.name().c_str(),
                  rd->super.settings.rx_queue_len);
        return UCS_ERR_NO_RESOURCE;
    }
    // Probe the inline size the device grants with a throw-away QP.
    verbs::qp probe;
    ucs_status_t status = create_uc_qp(iface, &probe, &rd->max_inline);
    if (status != UCS_OK) {
        return status;
    }
    probe.reset();
    // A peer costs one QP with a full send queue (both directions share
    // it), its endpoint and its receive connection.
    iface::conn_cost cost;
    cost.qps         = 1;
    cost.sq_wrs      = rd->super.settings.tx_queue_len;
    cost.wqe_bytes   = iface::wqe_bytes(max_sge, rd->max_inline);
    cost.state_bytes = sizeof(rd_ep) + sizeof(rx_conn);
    iface::set_auto_max_eps(&rd->super, cost, "uc_zv");
    iface::conn_callbacks cb = {iface,           accept_passive,    connect_ep_qp,
                                connection_established, connection_failed,
                                qp_released, nullptr};
    status = iface->conn.init(&rd->super, IBV_QPT_UC, cb, iface->settings.conn_timeout,
                              rd->as.timer.channel.get(), "UCX_UC_ZV_MAX_PEER_CONNS", true);
    if (status != UCS_OK) {
        return status;
    }
    rd->conn_cq = iface->conn.cq();
    rd->addr_qpn    = iface->conn.ud_qpn();
    rd->rx_offset   = 0;
    rd->max_payload = iface->settings.seg_size;
    if (one_packet(iface)) {
        const unsigned mtu        = rd->super.port->mtu_bytes;
        rd->max_payload           = std::min<unsigned>(iface->settings.seg_size,
                                                       mtu - sizeof(rd_hdr));
        iface->settings.max_write = std::min(iface->settings.max_write, mtu);
    }
    return UCS_OK;
}

} // namespace

ucs_status_t iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                        const uct_iface_config_t *config, const uc_settings &settings,
                        uct_iface_h *iface_p)
{
    auto *iface = new (std::nothrow) uc_iface{};
    if (iface == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    rd_iface *rd        = &iface->super;
    iface->settings     = settings;
    ucs_status_t status = open_begin(rd, &uc_transport, &uc_ops, md, worker, params, config,
                                     settings.rd);
    if (status == UCS_OK) {
        status = create_resources(iface);
    }
    if (status == UCS_OK) {
        status = open_finish(rd, params, std::max(rd->max_payload, iface->settings.max_write),
                             iface->srq.get(), nullptr);
    }
    return open_end(iface, status, progress<true>, progress_core<false, true>,
                    progress_core<true, true>, iface_p);
}

} // namespace zv::uc
