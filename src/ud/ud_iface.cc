// SPDX-License-Identifier: BSD-3-Clause
// ud_zv interface: resources, progress, send completions, timers (the
// receive path is ud_rx.cc).
#include "ud/ud_ep.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace zv::ud {

void post_rx(ud_iface *iface, unsigned count)
{
    ibv_recv_wr wrs[64];
    ibv_sge     sges[64];
    if (__builtin_expect(iface->qp_broken, 0)) {
        return; // all of them once the QP is reset
    }
    while (count > 0) {
        unsigned n = iface->rx_pool.fill_recv_wrs(wrs, sges, std::min(count, 64u));
        if (n == 0) {
            return; // pool exhausted; retried on the next progress
        }
        ibv_recv_wr *bad;
        int ret = iface->uc ? ibv_post_srq_recv(iface->srq, wrs, &bad) :
                              ibv_post_recv(iface->qp, wrs, &bad);
        if (ret != 0) {
            ucs_error("%s: posting receive buffers failed: %s",
                      iface->super.md->dev.name().c_str(), strerror(ret));
            for (ibv_recv_wr *w = bad; w != nullptr; w = w->next) {
                iface::buffer_pool::put(reinterpret_cast<iface::buffer *>(w->wr_id));
                --n;
            }
            iface->rx_posted += n;
            return;
        }
        iface->rx_posted += n;
        count -= n;
    }
}

namespace {

constexpr unsigned tx_poll_batch = 16;

unsigned poll_tx(ud_iface *iface)
{
    ibv_wc wc[tx_poll_batch];
    int n = ibv_poll_cq(iface->send_cq, tx_poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        --iface->tx_outstanding;
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) {
            // A datagram that did not leave is like one lost on the wire;
            // a QP in the error state is reset (ud) or fails its endpoint (uc).
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_debug("qp 0x%x: send completion error: %s", wc[i].qp_num,
                          ibv_wc_status_str(wc[i].status));
            }
            note_qp_error(iface, wc[i]);
        }
        if (wc[i].wr_id & wr_id_ctl) {
            // A control packet: its buffer (none when it went inline) is free.
            auto *cb = reinterpret_cast<iface::buffer *>(wc[i].wr_id & ~wr_id_ctl);
            if (cb != nullptr) {
                iface::buffer_pool::put(cb);
            }
            continue;
        }
        auto *d = reinterpret_cast<tx_desc *>(wc[i].wr_id);
        if ((--d->in_flight == 0) && d->acked) {
            release_desc(iface, d);
        }
    }
    return static_cast<unsigned>(n > 0 ? n : 0);
}

unsigned progress(uct_iface_h uct_iface)
{
    ud_iface *iface    = to_ud(uct_iface);
    iface->in_progress = true;
    unsigned count     = poll_rx(iface) + poll_tx(iface);
    // uc_zv's connection traffic is rare: every 32nd call, or while connecting.
    if (iface->uc) {
        if (iface->conn.busy() || ((++iface->progress_count & 31) == 0)) {
            count += iface->conn.progress();
        }
    } else if (__builtin_expect((++iface->progress_count & 1023) == 0, 0)) {
        scan_conns(iface, ucs_get_time()); // (it reads the clock every 1024th call)
    }
    if ((iface->busy_eps != nullptr) || (iface->owe_conns != nullptr)) {
        ucs_time_t now = ucs_get_time();
        if (now >= iface->next_timer) {
            iface->next_timer = now + iface->timer_tick;
            count += check_timers(iface, now);
        }
    }
    if (iface->pending_eps != nullptr) {
        dispatch_pending(iface);
    }
    if (__builtin_expect(iface->qp_broken, 0)) {
        recover_qp(iface);
    }
    iface->in_progress = false;
    if (__builtin_expect(!iface->graveyard.empty(), 0)) {
        free_deferred(iface);
    }
    return count;
}

// ---------------------------------------------------------------- iface ops

void destroy_resources(ud_iface *iface)
{
    const char *dev = iface->super.md->dev.name().c_str();
    verbs::destroy_qp(iface->qp);
    iface->qp = nullptr;
    for (ud_ep *ep : iface->eps.slots()) {
        if (ep != nullptr) {
            ep_free(ep);
        }
    }
    for (ud_ep *ep : iface->graveyard) {
        ep_free(ep);
    }
    // The connection manager owns uc_zv's passive queue pairs.
    iface->conn.~conn_manager();
    new (&iface->conn) iface::conn_manager();
    if ((iface->srq != nullptr) && (ibv_destroy_srq(iface->srq) != 0)) {
        ucs_warn("%s: ibv_destroy_srq() failed: %m", dev);
    }
    for (rx_conn *c : iface->conns.slots()) {
        delete c;
    }
    for (auto &kv : iface->ahs) {
        if (ibv_destroy_ah(kv.second) != 0) {
            ucs_warn("%s: ibv_destroy_ah() failed: %m", dev);
        }
    }
    iface->ahs.clear();
    if ((iface->recv_cq != nullptr) && (ibv_destroy_cq(iface->recv_cq) != 0)) {
        ucs_warn("%s: ibv_destroy_cq(recv) failed: %m", dev);
    }
    if ((iface->send_cq != nullptr) && (ibv_destroy_cq(iface->send_cq) != 0)) {
        ucs_warn("%s: ibv_destroy_cq(send) failed: %m", dev);
    }
}

void iface_close(uct_iface_h uct_iface)
{
    ud_iface *iface = to_ud(uct_iface);
    uct_base_iface_progress_disable(uct_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ucs_debug("%s iface %p: %lu packets resent, %lu duplicates and %lu out of "
              "order dropped, %lu invalid, %lu spoofed, %lu connections refused, "
              "%lu puts received, %lu zero-copy puts sent, %lu QP resets; "
              "%zu receive connections open, %lu reclaimed; "
              "injected %lu drops, %lu duplicates, %lu reorders",
              iface->uc ? "uc_zv" : "ud_zv", iface, iface->resent, iface->dup_rx,
              iface->gap_rx, iface->bad_rx, iface->spoofed_rx + iface->conn.spoofed(),
              iface->refused_conns + iface->conn.refused(), iface->rx_puts,
              iface->tx_put_zcopy, iface->qp_resets + iface->conn.resets(),
              iface->conns.count(), iface->reclaimed + iface->conn.reclaimed(),
              iface->fault.dropped, iface->fault.duplicated, iface->fault.held);
    if (iface->held_buf != nullptr) {
        iface::buffer_pool::put(iface->held_buf);
    }
    destroy_resources(iface);
    iface::cleanup(&iface->super);
    delete iface;
}

ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    ud_iface *iface = to_ud(uct_iface);
    iface::query_common(&iface->super, attr);
    attr->iface_addr_len = sizeof(iface_addr);
    attr->ep_addr_len    = 0;
    attr->max_conn_priv  = 0;
    attr->cap.flags      = UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                           UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                           UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                           UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    attr->cap.event_flags = 0; // retransmission needs progress: no sleeping
    attr->cap.am.max_short       = iface->max_payload - sizeof(uint64_t);
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
    ud_iface *iface = to_ud(uct_iface);
    uint32_t qpn    = iface->uc ? iface->conn.ud_qpn() : iface->qp->qp_num;
    auto *a      = reinterpret_cast<iface_addr *>(addr);
    iface::pack_qpn(a->qpn, qpn);
    return UCS_OK;
}

int is_reachable(const uct_iface_h uct_iface, const uct_device_addr_t *dev_addr,
                 const uct_iface_addr_t *)
{
    return (dev_addr != nullptr) &&
           iface::is_device_reachable(&to_ud(uct_iface)->super, dev_addr);
}

ucs_status_t iface_flush(uct_iface_h uct_iface, unsigned, uct_completion_t *comp)
{
    ud_iface *iface = to_ud(uct_iface);
    if (comp != nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    for (ud_ep *ep : iface->eps.slots()) {
        if ((ep != nullptr) && (ep->unreleased > 0)) {
            return UCS_INPROGRESS;
        }
    }
    return UCS_OK;
}

ucs_status_t iface_fence(uct_iface_h, unsigned)
{
    return UCS_OK;
}

void progress_enable(uct_iface_h iface, unsigned flags)
{
    uct_base_iface_progress_enable_cb(&to_ud(iface)->super.super,
                                      reinterpret_cast<ucs_callback_t>(progress), flags);
}



uct_iface_ops_t make_ops()
{
    uct_iface_ops_t ops;
    std::memset(&ops, 0, sizeof(ops));
    fill_ep_ops(&ops);
    ops.iface_flush              = iface_flush;
    ops.iface_fence              = iface_fence;
    ops.iface_progress_enable    = progress_enable;
    ops.iface_progress_disable   = iface::progress_disable;
    ops.iface_progress           = progress;
    ops.iface_close              = iface_close;
    ops.iface_query              = iface_query;
    ops.iface_get_device_address = iface::get_device_address;
    ops.iface_get_address        = get_address;
    ops.iface_is_reachable       = is_reachable;
    return ops;
}

uct_iface_ops_t          ud_ops          = make_ops();
uct_iface_ops_t          uc_ops          = uc_make_ops(make_ops());

ucs_status_t create_resources(ud_iface *iface, const uct_iface_params_t *params)
{
    const verbs::device &dev = iface->super.md->dev;
    const ud_settings &s     = iface->settings;
    const char *name         = dev.name().c_str();
    const unsigned mtu       = iface->super.port->mtu_bytes;

    iface->send_cq = ibv_create_cq(dev.ctx(), static_cast<int>(s.common.tx_queue_len),
                                   nullptr, nullptr, 0);
    iface->recv_cq = (iface->send_cq == nullptr) ? nullptr :
                     ibv_create_cq(dev.ctx(), static_cast<int>(s.common.rx_queue_len),
                                   nullptr, nullptr, 0);
    if ((iface->send_cq == nullptr) || (iface->recv_cq == nullptr)) {
        ucs_error("%s: ibv_create_cq() failed: %m", name);
        return UCS_ERR_NO_RESOURCE;
    }
    iface->tx_limit = s.common.tx_queue_len;
    ucs_status_t status;
    size_t tx_payload;
    if (s.uc) {
        status = uc_create_resources(iface); // SRQ, connection manager, inline size
        if (status != UCS_OK) {
            return status;
        }
        iface->rx_offset   = 0;
        iface->max_payload = s.seg_size;
        if (uc_one_packet(iface)) {
            iface->max_payload        = std::min<unsigned>(s.seg_size, mtu - sizeof(ud_hdr));
            iface->settings.max_write = std::min(s.max_write, mtu);
        }
        tx_payload = std::max(iface->max_payload, iface->settings.max_write);
    } else {
        status = verbs::create_ud_qp(dev, *iface->super.port, iface->send_cq,
                                     iface->recv_cq, s.common.tx_queue_len,
                                     s.common.rx_queue_len, s.max_inline, qkey,
                                     &iface->qp, max_sge);
        if (status != UCS_OK) {
            return status;
        }
        ibv_qp_attr qattr;
        ibv_qp_init_attr qinit;
        iface->max_inline = (ibv_query_qp(iface->qp, &qattr, IBV_QP_CAP, &qinit) == 0) ?
                            qinit.cap.max_inline_data : 0;
        iface->max_payload = mtu - sizeof(ud_hdr);
        tx_payload         = iface->max_payload;
    }
    iface->rx_headroom = (params->field_mask & UCT_IFACE_PARAM_FIELD_RX_HEADROOM) ?
                         params->rx_headroom : 0;
    const int node = iface->super.md->locality.numa_node;
    status = iface->rx_pool.init(&dev, s.uc ? "uc_zv receive" : "ud_zv receive",
                                 iface->rx_offset + sizeof(ud_hdr) + iface->max_payload,
                                 iface->rx_headroom, 256, 0, IBV_ACCESS_LOCAL_WRITE, node);
    if (status == UCS_OK) {
        status = iface->tx_pool.init(&dev, s.uc ? "uc_zv send" : "ud_zv send",
                                     sizeof(tx_desc) + sizeof(ud_hdr) + tx_payload,
                                     0, 128, s.common.tx_max_bufs, IBV_ACCESS_LOCAL_WRITE,
                                     node);
    }
    if (status == UCS_OK) {
        status = iface->tx_small_pool.init(&dev, s.uc ? "uc_zv small send" : "ud_zv small send",
                                           sizeof(tx_desc) + sizeof(ud_hdr) + small_payload,
                                           0, 256, 0, IBV_ACCESS_LOCAL_WRITE, node);
    }
    if (status == UCS_OK) {
        // Send buffers first: receive buffers take what locked memory is
        // left (see post_rx below).
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
                 "reorder %g, seed %lu", s.uc ? "uc_zv" : "ud_zv", s.fault.drop, s.fault.dup, s.fault.reorder,
                 s.fault.seed);
    }
    uint64_t tick     = std::min(s.rel.rto_init, s.rel.ack_delay) / 2;
    iface->timer_tick = (tick > 0) ? tick : 1;
    post_rx(iface, s.common.rx_queue_len);
    if (iface->rx_posted == 0) {
        ucs_error("%s: could not post any receive buffer", name);
        return UCS_ERR_NO_MEMORY;
    }
    if (iface->rx_posted < s.common.rx_queue_len) {
        ucs_warn("%s: %s: %u of UCX_%s_RX_QUEUE_LEN=%u receive buffers posted", name,
                 s.uc ? "uc_zv" : "ud_zv", iface->rx_posted, s.uc ? "UC_ZV" : "UD_ZV",
                 s.common.rx_queue_len);
    }
    return UCS_OK;
}

} // namespace

// ---------------------------------------------------------------- shared

unsigned check_timers(ud_iface *iface, ucs_time_t now)
{
    unsigned count = 0;
    std::vector<uint32_t> failed;
    for (ud_ep **p = &iface->busy_eps; *p != nullptr;) {
        ud_ep *ep = *p;
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
            failed.push_back(ep->id);
            break;
        }
        p = &ep->busy_next;
    }
    // Error callbacks may destroy endpoints: look each one up again.
    for (uint32_t id : failed) {
        ud_ep *ep = iface->eps.find(id);
        if (ep != nullptr) {
            ep_fail(ep, UCS_ERR_ENDPOINT_TIMEOUT,
                    (ep->st == ud_ep::state::connecting) ?
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

void conn_free(ud_iface *iface, rx_conn *c)
{
    if (c->partner != nullptr) {
        c->partner->partner = nullptr;
    }
    for (rx_conn **p = &iface->owe_conns; *p != nullptr; p = &(*p)->owe_next) {
        if (*p == c) {
            *p = c->owe_next;
            break;
        }
    }
    iface->conn_by_key.erase(std::make_tuple(gid_key(c->peer), c->peer_qpn, c->peer_ep));
    if (!iface->uc) {
        auto pit = iface->conns_per_peer.find(std::make_pair(gid_key(c->peer), c->peer_qpn));
        if ((pit != iface->conns_per_peer.end()) && (--pit->second == 0)) {
            iface->conns_per_peer.erase(pit);
        }
    }
    iface->conns.remove(c->id);
    delete c;
}

ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                        const uct_iface_params_t *params,
                        const uct_iface_config_t *config,
                        const ud_settings &settings, uct_iface_h *iface_p)
{
    auto *iface = new (std::nothrow) ud_iface{};
    if (iface == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = iface::init(&iface->super, settings.uc ? &uc_ops : &ud_ops,
                                      &iface::internal_ops, md, worker, params, config,
                                      settings.common);
    if (status != UCS_OK) {
        delete iface;
        return status;
    }
    iface->settings = settings;
    iface->uc       = settings.uc;
    status          = create_resources(iface, params);
    if (status != UCS_OK) {
        destroy_resources(iface);
        iface::cleanup(&iface->super);
        delete iface;
        return status;
    }
    ucs_debug("%s:%u: %s iface %p: qp 0x%x, %u receive buffers, max payload %u, "
              "max inline %u, window %u", iface->super.md->dev.name().c_str(),
              iface->super.port->port_num, settings.uc ? "uc_zv" : "ud_zv", iface,
              settings.uc ? iface->conn.ud_qpn() : iface->qp->qp_num, iface->rx_posted,
              iface->max_payload, iface->max_inline, settings.rel.window);
    iface::watch_events(&iface->super, handle_event);
    *iface_p = &iface->super.super.super;
    return UCS_OK;
}

} // namespace zv::ud
