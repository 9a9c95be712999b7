// SPDX-License-Identifier: BSD-3-Clause
// ud_zv interface: its UD QP, progress, the QP's error state, close.
#include "ud/ud_iface.h"

#include "rd/rd_progress_inl.h"

#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <new>

namespace zv::ud {

namespace {

/// Every signaled work request and every receive of the broken QP has
/// flushed: reset it, keeping its number, and post the receive buffers
/// again. (Unsignaled sends after the last signaled one may not have
/// flushed yet; the reset ends them, and their descriptors are the
/// acknowledgement's or settle_dropped()'s.)
void recover_qp(ud_iface *iface)
{
    rd_iface *rd = &iface->super;
    if (rd->tx_signaled > 0) {
        return; // next progress
    }
    if (rd->rx_ring.posted() > 0) {
        // (receives posted as the QP failed may wait for a second flush)
        verbs::flush_receives(iface->qp.get(), &iface->flush_kicked, ucs_time_from_msec(10));
        return;
    }
    if (verbs::reset_ud_qp(iface->qp.get(), *rd->super.port, qkey) != UCS_OK) {
        return;
    }
    tx_reset(rd);
    iface->qp_broken = false;
    rd->tx_paused    = false;
    tx_limit_update(rd);
    ++rd->qp_resets;
    rd->rx_ring.resume();
    rx_limit_update(rd);
    ucs_diag("%s: ud_zv qp 0x%x reset: %u receive buffers posted, unacknowledged "
             "packets are resent", rd->super.md->dev.name().c_str(), iface->qp->qp_num,
             rd->rx_ring.posted());
}

/// Progress, as the worker and the async side run it (rd_async.h).
// (inline into progress(); the async side calls it through its address)
template <bool Faults> [[gnu::always_inline]] inline unsigned progress_core(rd_iface *rd)
{
    ud_iface *iface = to_ud(&rd->super.super.super);
    unsigned count  = progress_begin<tenant, Faults>(&iface->super);
    // (progress_begin counts the calls)
    if (__builtin_expect((iface->super.progress_count.load(std::memory_order_relaxed) & 1023) == 0, 0)) {
        scan_conns(iface); // (it reads the clock: every 1024th call)
    }
    if (__builtin_expect(iface->qp_broken, 0)) {
        recover_qp(iface);
    }
    progress_end(&iface->super);
    return count;
}

template <bool Faults> unsigned progress(uct_iface_h uct_iface)
{
    rd_iface *rd = to_rd(uct_iface);
    worker_scope scope(&rd->as.gate);
    return progress_core<Faults>(rd);
}

/// A work request failed: if the QP is in the error state, nothing more is
/// posted to it until recover_qp() resets it.
void wc_error(rd_iface *rd, const ibv_wc &wc)
{
    ud_iface *iface = to_ud(rd);
    if (!iface->qp_broken && verbs::qp_in_error(iface->qp.get())) {
        iface->qp_broken = true;
        rd->tx_paused    = true;
        tx_limit_update(rd);
        rd->rx_ring.pause();
        ucs_diag("%s: ud_zv qp 0x%x entered the error state (%s): reset once its work "
                 "has flushed", rd->super.md->dev.name().c_str(), iface->qp->qp_num,
                 ibv_wc_status_str(wc.status));
    }
}

void qp_fatal(rd_iface *rd, uint32_t qpn)
{
    if (to_ud(rd)->qp->qp_num == qpn) {
        fail_all(rd, "the interface's qp failed");
    }
}

void conn_freed(rd_iface *rd, rx_conn *c)
{
    ud_iface *iface = to_ud(rd);
    iface->conn_by_key.erase(std::make_tuple(iface::gid_key(c->peer), c->peer_qpn,
                                             c->peer_ep));
    auto pit = iface->conns_per_peer.find(std::make_pair(iface::gid_key(c->peer),
                                                         c->peer_qpn));
    if ((pit != iface->conns_per_peer.end()) && (--pit->second == 0)) {
        iface->conns_per_peer.erase(pit);
    }
}

/// Close, or undo an open that failed after open_begin(). The QP goes
/// before the CQs it uses, which close_cqs() destroys before iface::cleanup()
/// (the members would go after it): hence its reset. The AHs go where they
/// always went; verbs only ask that they go before the md's PD.
void iface_close(uct_iface_h uct_iface)
{
    ud_iface *iface = to_ud(uct_iface);
    rd_iface *rd    = &iface->super;
    close_begin(rd);
    iface->qp.reset();
    close_eps(rd);
    iface->ahs.clear();
    close_cqs(rd);
    iface::cleanup(&rd->super);
    delete iface;
}

bool idle(const rd_iface *rd)
{
    return !to_ud(rd)->qp_broken;
}

constexpr rd_transport ud_transport = {
    "ud_zv", "UCX_UD_ZV_", wc_error, qp_fatal, conn_freed, nullptr, false, idle,
};

constexpr uct_iface_ops_t make_ops()
{
    uct_iface_ops_t ops{};
    fill_ops(ops);
    ops.ep_create             = ep_create;
    ops.ep_destroy            = ep_destroy;
    ops.iface_progress_enable = rd::progress_enable;
    ops.iface_progress        = progress<false>; // or <true>: choose_progress()
    ops.iface_close           = iface_close;
    return ops;
}

constexpr uct_iface_ops_t ud_ops = make_ops();

ucs_status_t create_qp(ud_iface *iface)
{
    rd_iface *rd             = &iface->super;
    const verbs::device &dev = rd->super.md->dev;
    const rd_settings &s     = rd->settings;
    ucs_status_t status = verbs::create_ud_qp(dev, *rd->super.port, rd->send_cq.get(),
                                              rd->recv_cq.get(), s.common.tx_queue_len,
                                              s.common.rx_queue_len, s.max_inline, qkey,
                                              &iface->qp, max_sge);
    if (status != UCS_OK) {
        return status;
    }
    ibv_qp_attr qattr;
    ibv_qp_init_attr qinit;
    rd->max_inline  = (ibv_query_qp(iface->qp.get(), &qattr, IBV_QP_CAP, &qinit) == 0) ?
                      qinit.cap.max_inline_data : 0;
    rd->max_payload = rd->super.port->mtu_bytes - sizeof(rd_hdr);
    rd->rx_offset   = grh_len;
    rd->addr_qpn    = iface->qp->qp_num;
    rd->qkey        = qkey;
    return UCS_OK;
}

} // namespace

ucs_status_t iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                        const uct_iface_config_t *config, const rd_settings &settings,
                        uct_iface_h *iface_p)
{
    auto *iface = new (std::nothrow) ud_iface{};
    if (iface == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    rd_iface *rd        = &iface->super;
    ucs_status_t status = open_begin(rd, &ud_transport, &ud_ops, md, worker, params, config,
                                     settings);
    if (status == UCS_OK) {
        status = create_qp(iface);
    }
    if (status == UCS_OK) {
        status = open_finish(rd, params, rd->max_payload, nullptr, iface->qp.get());
    }
    return open_end(iface, status, progress<true>, progress_core<false>, progress_core<true>,
                    iface_p);
}

} // namespace zv::ud
