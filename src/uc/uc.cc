// SPDX-License-Identifier: BSD-3-Clause
// uc_zv: Unreliable Connected queue pairs under ud_zv's software reliability.
#include "ud/ud_ep.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <cstring>
#include <new>

namespace zv::ud {

/*
 * uc_zv is ud_zv's reliability (src/ud/rel.h: sequence numbers, window,
 * acks, retransmission, peer timeout) carried by UC queue pairs instead of
 * one UD queue pair per interface. Connections are set up by the
 * connection manager rc_zv uses (src/iface/conn.h), with one QP for both
 * directions: the passive UC QP the peer's request creates here is adopted
 * by the first endpoint of ours towards that peer, as in rc_zv.
 *
 * So every connected QP carries up to two one-way streams, each with its
 * own reliability state: an endpoint's (ud_ep: its sends, and the acks for
 * them that come back) and a receive connection's (rx_conn: the peer's
 * sends, and the acks that go back). Every connected QP has a receive
 * connection from the moment it is connected; an endpoint is added when
 * one of ours uses it. A packet goes by its type: DATA and puts to the QP's
 * receive connection, ACK and NAK to its endpoint.
 *
 * Active messages are SENDs with ud_hdr in front. A put is an RDMA WRITE
 * with immediate data: UC drops a message that lost any packet, and the
 * immediate's receive completion exists only for a message that arrived
 * whole, so that completion (carrying the psn) is the put's reliable
 * packet. A put whose completion is dropped is written again when the
 * window goes back; writes are replayed in order, so the target ends with
 * the data of the last put, as if nothing was lost.
 */

namespace {

uct_iface_query_func_t ud_query = nullptr;

constexpr int qp_access = IBV_ACCESS_REMOTE_WRITE; // the peer's puts

/// A UC queue pair on the interface's CQs and SRQ; *max_inline (optional)
/// is what the device granted.
ucs_status_t create_uc_qp(ud_iface *iface, ibv_qp **qp_p, unsigned *max_inline = nullptr)
{
    verbs::connected_qp_params p;
    p.type         = IBV_QPT_UC;
    p.max_send_wr  = iface->super.settings.tx_queue_len;
    p.max_send_sge = max_sge;
    p.max_inline   = iface->settings.max_inline;
    p.send_cq      = iface->send_cq;
    p.recv_cq      = iface->recv_cq;
    p.srq          = iface->srq;
    unsigned inl;
    return verbs::create_connected_qp(iface->super.md->dev, p, qp_p,
                                      (max_inline != nullptr) ? max_inline : &inl);
}

// ---------------------------------------------------------------- connections

void qp_released(void *arg, ibv_qp *qp)
{
    auto *iface = static_cast<ud_iface *>(arg);
    auto it     = iface->conn_by_qp.find(qp->qp_num);
    if (it != iface->conn_by_qp.end()) {
        rx_conn *c = it->second;
        iface->conn_by_qp.erase(it);
        conn_free(iface, c);
    }
}

/// The receive connection of a connected QP (the peer's sends on it).
ucs_status_t add_rx_conn(ud_iface *iface, ibv_qp *qp, uint32_t peer_qpn)
{
    if (iface->conn_by_qp.count(qp->qp_num) != 0) {
        return UCS_OK;
    }
    if (iface->conns.full()) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    auto *c = new (std::nothrow) rx_conn{};
    if (c == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    c->qp       = qp;
    c->peer_qpn = peer_qpn;
    c->rx.init(&iface->settings.rel);
    c->id = iface->conns.add(c);
    iface->conn_by_qp[qp->qp_num] = c;
    return UCS_OK;
}

ucs_status_t connect_ep_qp(void *arg, ibv_qp *qp, const verbs::remote_port &peer,
                           uint32_t peer_qpn)
{
    auto *iface         = static_cast<ud_iface *>(arg);
    ucs_status_t status = verbs::connect_qp(qp, *iface->super.port, peer, peer_qpn,
                                            qp_access, verbs::rc_timing{});
    return (status == UCS_OK) ? add_rx_conn(iface, qp, peer_qpn) : status;
}

ucs_status_t accept_passive(void *arg, const verbs::remote_port &peer, uint32_t peer_qpn,
                            ibv_qp **qp_p)
{
    auto *iface = static_cast<ud_iface *>(arg);
    ibv_qp *qp;
    ucs_status_t status = create_uc_qp(iface, &qp);
    if (status != UCS_OK) {
        return status;
    }
    status = connect_ep_qp(iface, qp, peer, peer_qpn);
    if (status != UCS_OK) {
        qp_released(iface, qp);
        verbs::destroy_qp(qp);
        return status;
    }
    *qp_p = qp;
    return UCS_OK;
}

void connection_established(void *arg, uint64_t conn_id, uint32_t peer_qpn)
{
    auto *iface = static_cast<ud_iface *>(arg);
    ud_ep *ep   = iface->eps.find(conn_id);
    if ((ep == nullptr) || (ep->st != ud_ep::state::connecting)) {
        return;
    }
    ep->st        = ud_ep::state::connected;
    ep->peer_conn = peer_qpn; // also says "the QP left RESET"
    if (!ep->pending.empty() && !ep->on_pending) {
        ep->on_pending     = true;
        ep->pending_next   = iface->pending_eps;
        iface->pending_eps = ep;
    }
}

void connection_failed(void *arg, uint64_t conn_id, ucs_status_t status, const char *why)
{
    ud_ep *ep = static_cast<ud_iface *>(arg)->eps.find(conn_id);
    if (ep != nullptr) {
        ep_fail(ep, status, why);
    }
}

// ---------------------------------------------------------------- endpoint

ucs_status_t uc_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    ud_ep *ep;
    ucs_status_t status = ep_new(params, &ep);
    if (status != UCS_OK) {
        return status;
    }
    ud_iface *iface = ep->iface;
    // The QP the peer connected here for an endpoint of its own, if one is
    // unused: both directions then share it.
    ep->qp = iface->conn.claim(ep->peer, ep->peer_qpn);
    if (ep->qp == nullptr) {
        status = create_uc_qp(iface, &ep->qp);
        if (status != UCS_OK) {
            ep_discard(ep);
            return status;
        }
    }
    ep_register(ep);
    iface->ep_by_qp[ep->qp->qp_num] = ep;
    status = iface->conn.start(ep->id, ep->peer, ep->peer_qpn, ep->qp);
    if (status != UCS_OK) {
        iface->ep_by_qp.erase(ep->qp->qp_num);
        ep_release(ep);
        return status;
    }
    *ep_p = &ep->super.super;
    return UCS_OK;
}

void uc_ep_destroy(uct_ep_h uct_ep)
{
    ud_ep *ep       = to_ep(uct_ep);
    ud_iface *iface = ep->iface;
    iface->ep_by_qp.erase(ep->qp->qp_num);
    // Not flushed: the peer may still send on the QP (its receive
    // connection here stays). Every send is signaled, so the endpoint's
    // descriptors are released by their completions, and the QP goes back
    // to the connection manager with the endpoint (ep_free), which closes
    // it with the peer.
    ep_release(ep);
}

ucs_status_t uc_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    ucs_status_t status = ud_query(uct_iface, attr);
    if (status != UCS_OK) {
        return status;
    }
    ud_iface *iface       = to_ud(uct_iface);
    const unsigned write  = iface->settings.max_write;
    attr->cap.flags      |= UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY;
    attr->cap.put.max_short       = write;
    attr->cap.put.max_bcopy       = write;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = write;
    attr->cap.put.max_iov         = max_sge;
    attr->cap.put.opt_zcopy_align = 512;
    attr->cap.put.align_mtu       = iface->super.port->mtu_bytes;
    return UCS_OK;
}

} // namespace

bool uc_handle(ud_iface *iface, const char *pkt, const ibv_wc &wc, iface::buffer *b)
{
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint16_t psn;
        auto it = iface->conn_by_qp.find(wc.qp_num);
        if (!decode_put_imm(ntohl(wc.imm_data), &psn) || (it == iface->conn_by_qp.end())) {
            ++iface->bad_rx;
            return false;
        }
        ud_hdr h = {};
        h.psn    = psn;
        ++iface->rx_puts;
        return deliver_data(iface, it->second, h, nullptr, 0, b, false);
    }
    parsed_pkt p;
    if ((wc.opcode != IBV_WC_RECV) || (wc.wc_flags & IBV_WC_WITH_IMM) ||
        !parse_hdr(pkt, wc.byte_len, &p)) {
        ++iface->bad_rx;
        return false;
    }
    switch (p.hdr.type) {
    case ud_hdr::data: {
        auto it = iface->conn_by_qp.find(wc.qp_num);
        if (it == iface->conn_by_qp.end()) {
            ++iface->bad_rx;
            return false;
        }
        return deliver_data(iface, it->second, p.hdr, p.body, p.body_len, b, true);
    }
    case ud_hdr::ack:
    case ud_hdr::nak: {
        auto it = iface->ep_by_qp.find(wc.qp_num);
        if ((it == iface->ep_by_qp.end()) ||
            (it->second->st != ud_ep::state::connected)) {
            ++iface->bad_rx;
            return false;
        }
        ep_packet(it->second, p.hdr, p.body);
        return false;
    }
    default:
        ++iface->bad_rx; // no CREQ/CREP/DISC on connected queue pairs
        return false;
    }
}

ucs_status_t uc_create_resources(ud_iface *iface)
{
    const verbs::device &dev = iface->super.md->dev;
    ibv_srq_init_attr srq_attr = {};
    srq_attr.attr.max_wr       = iface->super.settings.rx_queue_len;
    srq_attr.attr.max_sge      = 1;
    iface->srq = ibv_create_srq(dev.pd(), &srq_attr);
    if (iface->srq == nullptr) {
        ucs_error("%s: ibv_create_srq(max_wr=%u) failed: %m", dev.name().c_str(),
                  iface->super.settings.rx_queue_len);
        return UCS_ERR_NO_RESOURCE;
    }
    // Probe the inline size the device grants with a throw-away QP.
    ibv_qp *probe;
    ucs_status_t status = create_uc_qp(iface, &probe, &iface->max_inline);
    if (status != UCS_OK) {
        return status;
    }
    verbs::destroy_qp(probe);
    // A peer costs one QP with a full send queue (both directions share
    // it), its endpoint and its receive connection.
    iface::conn_cost cost;
    cost.qps         = 1;
    cost.sq_wrs      = iface->super.settings.tx_queue_len;
    cost.wqe_bytes   = iface::wqe_bytes(max_sge, iface->max_inline);
    cost.state_bytes = sizeof(ud_ep) + sizeof(rx_conn);
    iface::set_auto_max_eps(&iface->super, cost, "uc_zv");
    iface::conn_callbacks cb = {iface,           accept_passive,    connect_ep_qp,
                                connection_established, connection_failed,
                                qp_released, nullptr};
    return iface->conn.init(&iface->super, IBV_QPT_UC, cb, iface->settings.conn_timeout,
                            nullptr, "UCX_UC_ZV_MAX_PEER_CONNS", true);
}

bool uc_one_packet(const ud_iface *iface)
{
    // A UC responder must take the first packet of a new message as a fresh
    // start when the previous message was cut short by a lost packet (the
    // class D1/E responder errors). Soft-RoCE does not: after a truncated message its
    // responder keeps the old opcode and drops every later message on that
    // QP (drivers/infiniband/sw/rxe/rxe_resp.c, check_op_seq and
    // do_class_d1e_error), so one lost packet silences the connection for
    // good. A message of one packet cannot be cut short, only lost whole.
    constexpr uint32_t rxe_vendor_id = 0xffffff;
    const verbs::device &dev = iface->super.md->dev;
    const bool rxe = (dev.attr().orig_attr.vendor_id == rxe_vendor_id);
    const ucs_on_off_auto_value_t one = iface->settings.one_packet;
    const bool on  = (one == UCS_CONFIG_ON) || ((one == UCS_CONFIG_AUTO) && rxe);
    if (on) {
        ucs_diag("uc_zv %s: one packet per message (MTU %u)%s", dev.name().c_str(),
                  iface->super.port->mtu_bytes,
                  (one == UCS_CONFIG_AUTO) ? ": Soft-RoCE drops all later messages after a truncated one" : "");
    }
    return on;
}

uct_iface_ops_t uc_make_ops(uct_iface_ops_t ops)
{
    ud_query           = ops.iface_query;
    ops.iface_query    = uc_query;
    ops.ep_create      = uc_ep_create;
    ops.ep_destroy     = uc_ep_destroy;
    fill_put_ops(&ops);
    return ops;
}

} // namespace zv::ud
