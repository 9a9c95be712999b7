// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram send side: posting packets and control packets,
// releasing acknowledged descriptors.
#include "rd/rd_ep.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace zv::rd {

ucs_status_t post_desc(rd_iface *iface, rd_ep *ep, tx_desc *d, bool first)
{
    if (iface->tx_outstanding >= iface->tx_limit) {
        return UCS_ERR_NO_RESOURCE;
    }
    // One signaled work request in tx_moderation on each send queue; a
    // first posting needs no completion of its own, since its
    // acknowledgement releases it.
    send_queue *sq       = ep->sq;
    const unsigned cover = sq->unsignaled + 1;
    const bool silent    = first && (cover < iface->settings.tx_moderation) &&
                           (iface->tx_silent < iface->tx_silent_max);
    // The interface's one work request (its 'next' stays null): only what
    // differs between packets is written, nothing is zero-filled per post.
    ibv_send_wr &wr = iface->tx_wr;
    wr.wr_id        = silent ? wr_id_silent :
                      (reinterpret_cast<uintptr_t>(d) |
                       (static_cast<uint64_t>(cover) << wr_id_cover_shift));
    wr.sg_list      = d->sge;
    wr.num_sge      = d->num_sge;
    wr.opcode       = static_cast<ibv_wr_opcode>(d->opcode);
    wr.send_flags   = (((d->num_sge == 1) && (d->sge[0].length <= iface->max_inline)) ?
                       IBV_SEND_INLINE : 0) | (silent ? 0 : IBV_SEND_SIGNALED);
    // Where it goes, as its endpoint or its transport wrote it (desc_get).
    wr.imm_data     = d->imm_data;
    std::memcpy(&wr.wr, &d->target, sizeof(d->target));
    ibv_qp *qp = ep->qp;
    ibv_send_wr *bad;
    int ret = ibv_post_send(qp, &wr, &bad);
    if (__builtin_expect(ret != 0, 0)) {
        ucs_debug("qp 0x%x: ibv_post_send() failed: %s", qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    if (silent) {
        sq->unsignaled = cover;
        d->silent_seq  = ++sq->posted;
        ++iface->tx_silent;
        ++iface->tx_outstanding;
        ++iface->tx_posted;
    } else {
        posted_signaled(iface, sq);
        ++d->in_flight;
    }
    return UCS_OK;
}

void posted_signaled(rd_iface *iface, send_queue *sq)
{
    iface->tx_silent  -= sq->unsignaled;
    sq->unsignaled     = 0;
    sq->last_signaled  = ++sq->posted;
    ++iface->tx_signaled;
    ++iface->tx_outstanding;
    ++iface->tx_posted;
}

ucs_status_t send_ctl(rd_iface *iface, ibv_qp *qp, ibv_ah *ah, uint32_t qpn,
                      const rd_hdr &hdr, const void *body, size_t body_len)
{
    if (iface->tx_outstanding >= iface->tx_limit) {
        return UCS_ERR_NO_RESOURCE;
    }
    // Control packets are small: inline from the stack when the device
    // allows, else from a small registered buffer released on completion.
    const size_t len = sizeof(hdr) + body_len;
    char inl[sizeof(rd_hdr) + 32];
    iface::buffer *b = nullptr;
    char *data       = inl;
    if ((len > iface->max_inline) || (len > sizeof(inl))) {
        b = iface->tx_small_pool.get();
        if (b == nullptr) {
            return UCS_ERR_NO_RESOURCE;
        }
        data = b->data();
    }
    std::memcpy(data, &hdr, sizeof(hdr));
    if (body_len > 0) {
        std::memcpy(data + sizeof(hdr), body, body_len);
    }
    ibv_sge sge = {reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(len),
                   (b != nullptr) ? b->lkey : 0};
    ibv_send_wr wr       = {};
    wr.wr_id             = reinterpret_cast<uintptr_t>(b) | wr_id_ctl |
                           (static_cast<uint64_t>(iface->sq.unsignaled + 1) << wr_id_cover_shift);
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED | ((b == nullptr) ? IBV_SEND_INLINE : 0);
    wr.wr.ud.ah          = ah; // (ignored on a connected QP)
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = iface->qkey;
    ibv_send_wr *bad;
    int ret = ibv_post_send(qp, &wr, &bad);
    if (ret != 0) {
        ucs_debug("qp 0x%x: ibv_post_send(control) failed: %s", qp->qp_num,
                  strerror(ret));
        if (b != nullptr) {
            iface::buffer_pool::put(b);
        }
        return UCS_ERR_IO_ERROR;
    }
    posted_signaled(iface, &iface->sq);
    return UCS_OK;
}

ucs_status_t send_to_ep(rd_iface *iface, const rx_conn *c, uint8_t type, const void *body,
                        size_t body_len)
{
    rd_hdr h  = {};
    h.dest    = c->peer_ep;
    h.ack_psn = c->rx.ack_psn();
    h.type    = type;
    h.magic   = rd_hdr::magic_value;
    return send_ctl(iface, c->qp, c->ah, c->peer_qpn, h, body, body_len);
}

ucs_status_t send_to_conn(const rd_ep *ep, uint8_t type, const void *body, size_t body_len)
{
    rd_hdr h = {};
    h.dest   = ep->peer_conn;
    h.type   = type;
    h.magic  = rd_hdr::magic_value;
    return send_ctl(ep->iface, ep->qp, ep->target.ud.ah, ep->peer_qpn, h, body, body_len);
}

void settle_dropped(rd_iface *iface, tx_desc *d)
{
    d->acked = true;
    if (d->in_flight != 0) {
        return; // its signaled posting's completion releases it
    }
    const send_queue *sq = d->ep->sq;
    if (d->silent_seq <= sq->done) {
        release_desc(iface, d);
        return;
    }
    // Its unsignaled posting may still be queued. A later signaled work
    // request on its queue will say when it is not; without one, posting d
    // once more, signaled, makes one (whose completion then releases d).
    if ((sq->last_signaled < d->silent_seq) &&
        (post_desc(iface, d->ep, d, false) == UCS_OK)) {
        return;
    }
    d->park_next  = iface->parked;
    iface->parked = d;
}

void settle_parked(rd_iface *iface)
{
    // A release calls back, and an endpoint destroyed there waits for its
    // descriptors, some perhaps still on this list: a nested call goes on
    // with the list first. (settle_dropped parks again on iface->parked.)
    if (iface->settling == nullptr) {
        iface->settling = iface->parked;
        iface->parked   = nullptr;
    }
    while (iface->settling != nullptr) {
        tx_desc *d      = iface->settling;
        iface->settling = d->park_next;
        settle_dropped(iface, d);
    }
}

void tx_reset(rd_iface *iface)
{
    iface->tx_outstanding = 0;
    iface->tx_silent      = 0;
    iface->sq.unsignaled  = 0;
    iface->sq.done        = iface->sq.posted;
    if (iface->parked != nullptr) {
        settle_parked(iface);
    }
}

void release_desc(rd_iface *iface, tx_desc *d)
{
    rd_ep *ep              = d->ep;
    uct_completion_t *comp = d->comp;
    ucs_status_t status    = d->status;
    iface::buffer_pool::put(d->buf);
    iface->tx_starved = false;
    --ep->unreleased;
    if (comp != nullptr) {
        --ep->comps_unreleased;
        if (__builtin_expect(ep->comps_abandoned, 0)) {
            // (ep_release gave up waiting for them: nobody is told)
        } else if (__builtin_expect(iface->as.active, 0)) {
            async_defer_completion(iface, comp, status, ep->id);
        } else {
            uct_invoke_completion(comp, status);
        }
    }
    if ((ep->unreleased == 0) && !ep->destroyed) {
        ep_check_flushed(ep);
    }
}

} // namespace zv::rd
