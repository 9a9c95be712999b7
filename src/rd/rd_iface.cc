// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram interface: opening and closing what the transports
// share, send completions, timers (progress_begin is rd_progress_inl.h's,
// the receive path rd_rx.cc's).
#include "rd/rd_ep.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

namespace zv::rd {

unsigned poll_tx(rd_iface *iface)
{
    unsigned n = 0;
    if (iface->tx_wc_next == iface->tx_wc_count) {
        int got = ibv_poll_cq(iface->send_cq.get(), tx_poll_batch, iface->tx_wc);
        if (got <= 0) {
            return 0;
        }
        n                  = static_cast<unsigned>(got);
        iface->tx_wc_count = n;
        iface->tx_wc_next  = 0;
        iface->tx_completions += n;
    }
    // The cursor is the interface's: a callback below (a completion, an
    // error handler) may destroy an endpoint, whose wait for its sends
    // handles the rest of this batch. So each entry is accounted for
    // before anything is called back.
    while (iface->tx_wc_next < iface->tx_wc_count) {
        const ibv_wc wc = iface->tx_wc[iface->tx_wc_next++];
        // (Flushed unsignaled work, wr_id_silent, only comes with an error:
        // the reset that follows counts it (tx_reset), and its descriptor
        // is the acknowledgement's.)
        if (__builtin_expect(wc.wr_id != wr_id_silent, 1)) {
            // A signaled work request, and the unsignaled ones before it on
            // its send queue.
            const unsigned cover   = static_cast<unsigned>(wc.wr_id >> wr_id_cover_shift);
            const uint64_t ptr     = wc.wr_id & wr_id_ptr_mask;
            iface->tx_outstanding -= cover;
            --iface->tx_signaled;
            if (ptr & wr_id_ctl) {
                // A control packet: its buffer (none when it went inline) is free.
                iface->sq.done += cover;
                auto *cb = reinterpret_cast<iface::buffer *>(ptr & ~(wr_id_ctl | wr_id_marker));
                if (cb != nullptr) {
                    iface::buffer_pool::put(cb);
                }
            } else {
                auto *d = reinterpret_cast<tx_desc *>(ptr);
                d->ep->sq->done += cover;
                if ((--d->in_flight == 0) && d->acked) {
                    release_desc(iface, d);
                }
            }
        }
        if (__builtin_expect(wc.status != IBV_WC_SUCCESS, 0)) {
            // A packet that did not leave is like one lost on the wire; what
            // it means for the QP is the transport's to say.
            if (wc.status != IBV_WC_WR_FLUSH_ERR) {
                ucs_debug("qp 0x%x: send completion error: %s", wc.qp_num,
                          ibv_wc_status_str(wc.status));
            }
            iface->tl->wc_error(iface, wc);
        }
    }
    if (__builtin_expect((iface->parked != nullptr) || (iface->settling != nullptr), 0)) {
        settle_parked(iface);
    }
    return n;
}

void choose_progress(rd_iface *iface, uct_iface_progress_func_t faulty)
{
    if (iface->fault.on()) {
        iface->super.super.super.ops.iface_progress = faulty;
    }
}

void progress_enable(uct_iface_h iface, unsigned flags)
{
    uct_base_iface_progress_enable_cb(reinterpret_cast<uct_base_iface_t *>(iface),
                                      reinterpret_cast<ucs_callback_t>(
                                              iface->ops.iface_progress),
                                      flags);
}

// ---------------------------------------------------------------- open, close

ucs_status_t open_begin(rd_iface *iface, const rd_transport *tl, const uct_iface_ops_t *ops,
                        uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                        const uct_iface_config_t *config, const rd_settings &settings)
{
    ucs_status_t status = iface::init(&iface->super, ops, &iface::internal_ops<ep_is_connected>,
                                      md, worker, params, config, settings.common);
    if (status != UCS_OK) {
        return status;
    }
    iface->tl       = tl;
    iface->super.tl_name = tl->name;
    iface->settings = settings;
    iface->tx_limit = settings.common.tx_queue_len;
    // With a send queue per endpoint, idle endpoints' unsignaled tails hold
    // at most half the send budget; with one, its moderation bounds them.
    iface->tx_silent_max = tl->own_send_queues ? settings.common.tx_queue_len / 2 : UINT_MAX;
    const verbs::device &dev = iface->super.md->dev;
    // (what reaches recv_cq wakes the async side's sleeping timer)
    ibv_comp_channel *channel = iface::async_timer_channel(&iface->as.timer, &iface->as.gate,
                                                           iface->super.super.worker->async,
                                                           dev.ctx(), tl->name);
    iface->send_cq.reset(ibv_create_cq(dev.ctx(),
                                       static_cast<int>(settings.common.tx_queue_len),
                                       nullptr, nullptr, 0));
    if (iface->send_cq) {
        iface->recv_cq.reset(ibv_create_cq(dev.ctx(),
                                           static_cast<int>(settings.common.rx_queue_len),
                                           nullptr, channel, 0));
    }
    if (!iface->send_cq || !iface->recv_cq) {
        ucs_error("%s: %s: ibv_create_cq() failed: %m", dev.name().c_str(), tl->name);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

ucs_status_t open_finish(rd_iface *iface, const uct_iface_params_t *params,
                         size_t tx_payload, ibv_srq *srq, ibv_qp *qp)
{
    const verbs::device &dev = iface->super.md->dev;
    const rd_settings &s     = iface->settings;
    const char *tl           = iface->tl->name;
    const int node           = iface->super.md->locality.numa_node;
    iface->rx_headroom = (params->field_mask & UCT_IFACE_PARAM_FIELD_RX_HEADROOM) ?
                         params->rx_headroom : 0;
    char rx_name[64], tx_name[64], small_name[64];
    std::snprintf(rx_name, sizeof(rx_name), "%s receive", tl);
    std::snprintf(tx_name, sizeof(tx_name), "%s send", tl);
    std::snprintf(small_name, sizeof(small_name), "%s small send", tl);
    // Receive buffers: the posted ring, what UCP keeps (2 x RX_QUEUE_LEN
    // at most, rx_max_held), what waits for a computing worker (RX_QUEUE_LEN
    // at most, the async side's): never more than 4 x RX_QUEUE_LEN.
    const unsigned rx_len = s.common.rx_queue_len;
    iface->rx_max_held    = 2 * rx_len;
    ucs_status_t status   = iface->rx_pool.init(&dev, rx_name,
                                                iface->rx_offset + sizeof(rd_hdr) +
                                                        iface->max_payload,
                                                iface->rx_headroom, 256, 4 * rx_len,
                                                IBV_ACCESS_LOCAL_WRITE, node,
                                                iface::rx_alignment(params, iface->rx_offset +
                                                                            sizeof(rd_hdr)));
    if (status == UCS_OK) {
        status = iface->tx_pool.init(&dev, tx_name,
                                     sizeof(tx_desc) + sizeof(rd_hdr) + tx_payload, 0, 128,
                                     s.common.tx_max_bufs, IBV_ACCESS_LOCAL_WRITE, node);
    }
    if (status == UCS_OK) {
        status = iface->tx_small_pool.init(&dev, small_name,
                                           sizeof(tx_desc) + sizeof(rd_hdr) + small_payload,
                                           0, 256, 0, IBV_ACCESS_LOCAL_WRITE, node);
    }
    if (status == UCS_OK) {
        // Send buffers first: receive buffers take what locked memory is
        // left (see the ring's fill below).
        status = iface->tx_small_pool.reserve();
    }
    if (status == UCS_OK) {
        status = iface->tx_pool.reserve();
    }
    if (status != UCS_OK) {
        return status;
    }
    iface->release_desc.super.cb = release_rx;
    iface->release_desc.owner    = iface;
    iface->fault.init(s.fault);
    if (iface->fault.on()) {
        ucs_diag("%s: fault injection in the receive path: drop %g, duplicate %g, "
                 "reorder %g, seed %lu", tl, s.fault.drop, s.fault.dup, s.fault.reorder,
                 s.fault.seed);
    }
    uint64_t tick     = std::min(s.rel.rto_init, s.rel.ack_delay) / 2;
    iface->timer_tick = (tick > 0) ? tick : 1;
    iface->rx_ring.init(&iface->rx_pool, srq, qp, s.common.rx_queue_len, s.rx_batch);
    char var[64];
    std::snprintf(var, sizeof(var), "%sRX_QUEUE_LEN", iface->tl->prefix);
    status = iface->rx_ring.fill(dev.name().c_str(), tl, var);
    if (status != UCS_OK) {
        return status;
    }
    rx_limit_update(iface);
    ucs_debug("%s:%u: %s iface %p: qp 0x%x, %u receive buffers, max payload %u, "
              "max inline %u, window %u", dev.name().c_str(), iface->super.port->port_num,
              tl, iface, iface->addr_qpn, iface->rx_ring.posted(), iface->max_payload,
              iface->max_inline, s.rel.window);
    // (Room for what the async side defers: see async_state::deferred.)
    status = util::try_alloc([&] { iface->as.deferred.reserve(async_room_base); });
    if (status != UCS_OK) {
        ucs_error("%s: no memory for the interface's async side", tl);
        return status;
    }
    return iface::watch_events(&iface->super, handle_event);
}

void close_begin(rd_iface *iface)
{
    async_close(iface); // first: nothing runs the core from the async side after it
    uct_base_iface_progress_disable(&iface->super.super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ucs_debug("%s iface %p: %lu packets resent, %lu duplicates and %lu out of "
              "order dropped, %lu invalid, %lu spoofed, %lu connections refused, "
              "%lu puts received, %lu zero-copy puts sent, %lu QP resets; "
              "%lu work requests posted, %lu send completions, %lu acks sent alone; "
              "%lu active messages refused (%u receive buffers held by UCP, %u "
              "registered); %zu receive connections open, %lu reclaimed; "
              "injected %lu drops, %lu duplicates, %lu reorders",
              iface->tl->name, iface, iface->resent, iface->dup_rx, iface->gap_rx,
              iface->bad_rx, iface->spoofed_rx, iface->refused_conns, iface->rx_puts,
              iface->tx_put_zcopy, iface->qp_resets, iface->tx_posted, iface->tx_completions,
              iface->acks_alone, iface->rx_refused, iface->rx_held,
              iface->rx_pool.allocated(), iface->conns.count(), iface->reclaimed,
              iface->fault.dropped, iface->fault.duplicated, iface->fault.held);
    if (iface->held_buf != nullptr) {
        iface::buffer_pool::put(iface->held_buf);
        iface->held_buf = nullptr;
    }
}

void close_eps(rd_iface *iface)
{
    // (The QP goes next: nothing reads the parked descriptors any more.)
    while (iface->parked != nullptr) {
        tx_desc *d    = iface->parked;
        iface->parked = d->park_next;
        iface::buffer_pool::put(d->buf);
    }
    for (rd_ep *ep : iface->eps.slots()) {
        if (ep != nullptr) {
            ep_free(ep);
        }
    }
    for (rd_ep *ep : iface->graveyard) {
        ep_free(ep);
    }
    iface->graveyard.clear();
    for (rx_conn *c : iface->conns.slots()) {
        delete c;
    }
}

void close_cqs(rd_iface *iface)
{
    // Not left to the members: the channel recv_cq is on (the async side's
    // timer's) must go after it.
    iface->recv_cq.reset();
    iface->send_cq.reset();
    iface::async_timer_destroy_channel(&iface->as.timer); // (after every CQ on it)
}

// ---------------------------------------------------------------- ops

ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    rd_iface *iface = to_rd(uct_iface);
    iface::query_common(&iface->super, attr);
    attr->iface_addr_len = sizeof(iface_addr);
    attr->ep_addr_len    = 0;
    attr->max_conn_priv  = 0;
    attr->cap.flags      = UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                           UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                           UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                           UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | ucx::iface_flag_inter_node;
    attr->cap.event_flags = 0; // retransmission needs progress: no sleeping
    // (UCT's max_short counts the 8-byte header: header + payload fit it)
    attr->cap.am.max_short       = iface->max_payload;
    attr->cap.am.max_bcopy       = iface->max_payload;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = iface->max_payload;
    attr->cap.am.max_hdr         = std::min<size_t>(64, iface->max_payload);
    attr->cap.am.max_iov         = max_sge - 1;
    attr->cap.am.opt_zcopy_align = 512;
    attr->cap.am.align_mtu       = iface->super.port->mtu_bytes;
    // Software acks and a copy per packet on both sides.
    attr->overhead = 100e-9;
    return UCS_OK;
}

ucs_status_t get_address(uct_iface_h uct_iface, uct_iface_addr_t *addr)
{
    auto *a = reinterpret_cast<iface_addr *>(addr);
    iface::pack_qpn(a->qpn, to_rd(uct_iface)->addr_qpn);
    return UCS_OK;
}

ucs_status_t iface_flush(uct_iface_h uct_iface, unsigned, uct_completion_t *comp)
{
    rd_iface *iface = to_rd(uct_iface);
    worker_scope scope(&iface->as.gate);
    if (comp != nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t status = UCS_OK;
    for (rd_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->unreleased > 0)) {
            request_ack(ep);
            status = UCS_INPROGRESS;
        }
    }
    return status;
}

ucs_status_t iface_fence(uct_iface_h, unsigned)
{
    return UCS_OK;
}

// ---------------------------------------------------------------- shared

unsigned check_timers(rd_iface *iface, ucs_time_t now)
{
    if (__builtin_expect(iface->port_down, 0)) {
        // Nothing goes out (tx_limit 0) and nothing is expected: wait for
        // the port, within a bound (the worker's timers fail, never the
        // async side's).
        if (!iface->as.active && (now - iface->port_down_at >= port_down_limit(iface))) {
            fail_all(iface, "its port has been down for 3 x TIMEOUT");
        }
        return 0;
    }
    unsigned count  = 0;
    bool any_failed = false;
    for (rd_ep **p = &iface->busy_eps; *p != nullptr;) {
        rd_ep *ep = *p;
        if (ep->resend_next != nullptr) {
            count += resend_continue(ep);
        }
        switch (ep->tx.on_timer(now)) {
        case rel::sender::timer_result::idle:
            if (ep->resend_next == nullptr) {
                *p          = ep->busy_next;
                ep->on_busy = false;
                continue;
            }
            break;
        case rel::sender::timer_result::wait:
            break;
        case rel::sender::timer_result::resend:
            resend_all(ep);
            ++count;
            break;
        case rel::sender::timer_result::failed:
            // (the worker's own timers fail it: the async side never
            // declares a peer dead for a worker that is away)
            if (!iface->as.active) {
                ep->timed_out = true;
                any_failed    = true;
            }
            break;
        }
        p = &ep->busy_next;
    }
    // Marked, then failed by index with the table read again each time:
    // error callbacks may destroy endpoints (a destroyed one leaves the
    // table) or create them, and nothing here allocates.
    for (size_t i = 0; any_failed && (i < iface->eps.slots().size()); ++i) {
        rd_ep *ep = iface->eps.slots()[i];
        if ((ep != nullptr) && ep->timed_out) {
            ep->timed_out = false;
            ep_fail(ep, UCS_ERR_ENDPOINT_TIMEOUT,
                    (ep->st == rd_ep::state::connecting) ?
                            "the peer's interface answered no connection request within "
                            "the peer timeout" :
                            "no acknowledgement within the peer timeout");
        }
    }
    if (iface->owe_conns != nullptr) {
        send_acks(iface, now);
    }
    return count;
}

// ---------------------------------------------------------------- connections

rx_conn *conn_alloc(rd_iface *iface, rel::psn_t first_psn)
{
    if (iface->conns.full()) {
        return nullptr;
    }
    auto *c = new (std::nothrow) rx_conn{};
    if (c == nullptr) {
        return nullptr;
    }
    c->id = iface->conns.add(c);
    c->rx.init(&iface->settings.rel, first_psn);
    return c;
}

void find_partner(rd_iface *iface, rx_conn *c)
{
    for (rd_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->partner == nullptr) && (ep->peer_qpn == c->peer_qpn) &&
            (std::memcmp(ep->peer.gid, c->peer.gid, sizeof(c->peer.gid)) == 0)) {
            ep->partner = c;
            c->partner  = ep;
            return;
        }
    }
}

void find_partner(rd_ep *ep)
{
    for (rx_conn *c : ep->iface->conns.slots()) {
        if ((c != nullptr) && (c->partner == nullptr) && (c->peer_qpn == ep->peer_qpn) &&
            (std::memcmp(c->peer.gid, ep->peer.gid, sizeof(ep->peer.gid)) == 0)) {
            c->partner  = ep;
            ep->partner = c;
            return;
        }
    }
}

void conn_free(rd_iface *iface, rx_conn *c)
{
    if (iface->tl->conn_freed != nullptr) {
        iface->tl->conn_freed(iface, c);
    }
    if (c->partner != nullptr) {
        c->partner->partner = nullptr;
    }
    for (rx_conn **p = &iface->owe_conns; *p != nullptr; p = &(*p)->owe_next) {
        if (*p == c) {
            *p = c->owe_next;
            break;
        }
    }
    iface->conns.remove(c->id);
    delete c;
}

} // namespace zv::rd
