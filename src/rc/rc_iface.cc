// SPDX-License-Identifier: BSD-3-Clause
// rc_zv interface: resources, receive path, progress, attributes.
#include "rc/rc_ep.h"
#include "rc/rc_ep_inl.h"
#include "rc/rc_wire.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace zv::rc {

namespace {

constexpr unsigned rx_poll_batch = 16;
constexpr unsigned tx_poll_batch = 16;
constexpr int      stash_len        = rc_iface::stash_capacity;

// ---------------------------------------------------------------- receive

void release_rx(uct_recv_desc_t *self, void *desc)
{
    rc_iface *iface = static_cast<rc_iface *>(
            reinterpret_cast<iface::release_desc *>(self)->owner);
    iface::buffer *b = iface->rx_pool.from_data(static_cast<char *>(desc) +
                                                iface->rx_pool.headroom());
    iface::buffer_pool::put(b);
}

// (The receive and send polls are inlined into progress: one frame per call.)
[[gnu::always_inline]] inline void handle_rx(rc_iface *iface, const ibv_wc *wc, int n)
{
    for (int i = 0; i < n; ++i) {
        auto *b = reinterpret_cast<iface::buffer *>(wc[i].wr_id);
        iface->rx_ring.consumed();
        uint8_t am_id;
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) {
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_debug("%s: receive completion error: %s",
                          iface->super.md->dev.name().c_str(),
                          ibv_wc_status_str(wc[i].status));
            }
            iface::buffer_pool::put(b);
            continue;
        }
        if (__builtin_expect((wc[i].opcode != IBV_WC_RECV) ||
                             !(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
                             !decode_am(wc[i].imm_data, &am_id), 0)) {
            ucs_debug("%s: dropped a malformed message from qp 0x%x",
                      iface->super.md->dev.name().c_str(), wc[i].src_qp);
            iface::buffer_pool::put(b);
            continue;
        }
        ucs_status_t status = uct_iface_invoke_am(&iface->super.super, am_id,
                                                  iface->rx_pool.data(b), wc[i].byte_len,
                                                  UCT_CB_PARAM_FLAG_DESC);
        if (status == UCS_OK) {
            iface::buffer_pool::put(b);
        } else {
            // The upper layer keeps the data; it releases it later through
            // uct_iface_release_desc(), which lands in release_rx().
            *iface->rx_pool.recv_desc_slot(b) = &iface->release_desc.super;
        }
    }
}

[[gnu::always_inline]] inline unsigned poll_rx(rc_iface *iface)
{
    ibv_wc wc[rx_poll_batch];
    int n = ibv_poll_cq(iface->recv_cq.get(), rx_poll_batch, wc);
    handle_rx(iface, wc, n);
    iface->rx_ring.refill();
    return static_cast<unsigned>(n > 0 ? n : 0);
}

[[gnu::always_inline]] inline unsigned poll_tx(rc_iface *iface)
{
    ibv_wc wc[tx_poll_batch];
    int n = ibv_poll_cq(iface->send_cq.get(), tx_poll_batch, wc);
    // (Inside progress: endpoints destroyed by completion callbacks are
    // freed when it returns.)
    for (int i = 0; i < n; ++i) {
        process_send_completion(iface, wc[i]);
    }
    if (((n > 0) || iface->pending_more) && (iface->pending_eps != nullptr)) {
        dispatch_pending(iface);
    }
    return static_cast<unsigned>(n > 0 ? n : 0);
}

// Completions that event_arm() found while arming: handled first.
unsigned handle_stash(rc_iface *iface)
{
    unsigned count       = iface->stash_rx_count + iface->stash_tx_count;
    iface->stash_pending = false;
    if (iface->stash_rx_count > 0) {
        int n                 = static_cast<int>(iface->stash_rx_count);
        iface->stash_rx_count = 0;
        handle_rx(iface, iface->stash_rx, n);
    }
    if (iface->stash_tx_count > 0) {
        unsigned n            = iface->stash_tx_count;
        iface->stash_tx_count = 0;
        for (unsigned i = 0; i < n; ++i) {
            process_send_completion(iface, iface->stash_tx[i]);
        }
        if (iface->pending_eps != nullptr) {
            dispatch_pending(iface);
        }
    }
    return count;
}

/// The polls of a progress call: receives, then (rc_verbs' rule) send
/// completions, then connection traffic every 64th call, or always while a
/// connection is being set up.
[[gnu::always_inline]] inline unsigned progress_polls(rc_iface *iface)
{
    const unsigned call = iface->progress_count.load(std::memory_order_relaxed) + 1;
    iface->progress_count.store(call, std::memory_order_relaxed);
    unsigned count      = poll_rx(iface);
    if (iface::poll_tx_now(count, call, iface->tx_outstanding, iface->tx_cq_limit)) {
        count += poll_tx(iface);
    }
    if (((call & 63) == 0) || iface->conn.busy()) {
        count += progress_conn(iface);
    }
    return count;
}

/// A progress call inside another (a callback progressed the worker), or
/// with completions that event_arm() stashed: out of line, under a guard.
[[gnu::noinline]] unsigned progress_general(rc_iface *iface)
{
    progress_guard guard(iface);
    const unsigned count = iface->stash_pending ? handle_stash(iface) : 0;
    return count + progress_polls(iface);
}

unsigned progress(uct_iface_h uct_iface)
{
    rc_iface *iface = to_rc(uct_iface);
    if (__builtin_expect(iface->in_progress || iface->stash_pending, 0)) {
        return progress_general(iface);
    }
    // The outermost call, nothing stashed: progress_guard's work, inline.
    // Any callback below (active message, completion, pending, connection,
    // error) may destroy endpoints, its own or others: they are freed here.
    iface->in_progress   = true;
    const unsigned count = progress_polls(iface);
    iface->in_progress   = false;
    if (__builtin_expect(iface->deferred_frees > 0, 0)) {
        free_deferred(iface);
    }
    return count;
}

// ---------------------------------------------------------------- device events

/// Ask the device for an SRQ-limit event when fewer than a quarter of the
/// receive buffers are left: a burst that arrives faster than progress
/// polls is then caught up with at once (handle_event), before senders
/// meet receiver-not-ready.
void arm_srq_limit(rc_iface *iface)
{
    ibv_srq_attr attr = {};
    attr.srq_limit    = std::max(1u, iface->super.settings.rx_queue_len / 4);
    int ret           = ibv_modify_srq(iface->srq.get(), &attr, IBV_SRQ_LIMIT);
    if (ret != 0) {
        ucs_debug("%s: rc_zv: cannot arm the SRQ limit: %s",
                  iface->super.md->dev.name().c_str(), strerror(ret));
    }
}

/// The SRQ ran low: handle every receive completion already there, post
/// what they free, and arm the limit again.
void refill_srq(rc_iface *iface)
{
    ++iface->srq_limit_events;
    unsigned rounds = iface->super.settings.rx_queue_len / rx_poll_batch + 1;
    while ((rounds-- > 0) && (poll_rx(iface) == rx_poll_batch)) {
    }
    iface->rx_ring.top_up();
    arm_srq_limit(iface);
}

// ---------------------------------------------------------------- iface ops

/// Close, or undo an open that failed after iface::init(). The async side
/// stops before anything it runs goes; then verbs' order: the connection
/// manager's QPs (every connected QP) before the SRQ and CQs they use, the
/// CQs before their channel (the manager's CQ before the timer's channel),
/// and the SRQ before the MRs of the receive buffers posted to it (the
/// pools, destroyed with the interface). The members would go the other
/// way round, pools first, and after iface::cleanup(): hence the resets.
void iface_close(uct_iface_h uct_iface)
{
    rc_iface *iface = to_rc(uct_iface);
    uct_base_iface_progress_disable(uct_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    async_close(iface); // first: nothing runs the manager from the async side after it
    for (rc_ep *ep : iface->slots) {
        if (ep != nullptr) {
            ep->qp = nullptr; // the connection manager's, destroyed with it
            if (ep->destroyed) {
                delete ep;
            }
        }
    }
    if ((iface->conn.spoofed() + iface->conn.refused() + iface->conn.reclaimed() +
         iface->conn.resets()) != 0) {
        ucs_debug("rc_zv iface %p: %lu connection messages not from the interface they "
                  "named, %lu connection requests refused (MAX_PEER_CONNS), %lu unused "
                  "QPs of gone peers destroyed, %lu connection QP resets", iface,
                  iface->conn.spoofed(), iface->conn.refused(), iface->conn.reclaimed(),
                  iface->conn.resets());
    }
    iface->conn.shutdown();
    iface->srq.reset();
    iface->recv_cq.reset();
    iface->send_cq.reset();
    iface->channel.reset();
    iface::async_timer_destroy_channel(&iface->timer); // (after the manager's CQ)
    for (int *fd : {&iface->event_epfd, &iface->notify_fd}) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    for (tx_op *chunk : iface->op_chunks) {
        delete[] chunk;
    }
    iface::cleanup(&iface->super);
    delete iface;
}

ucs_status_t iface_query(uct_iface_h uct_iface, uct_iface_attr_t *attr)
{
    rc_iface *iface       = to_rc(uct_iface);
    const rc_settings &s  = iface->settings;
    const size_t seg      = s.seg_size;
    const size_t max_msg  = iface->super.port->attr.max_msg_sz;
    const size_t iov_max  = 4;                // SGEs of a send WR (qp.h)

    iface::query_common(&iface->super, attr);
    attr->iface_addr_len = sizeof(iface_addr);
    attr->ep_addr_len    = 0;
    attr->max_conn_priv  = 0;
    attr->cap.flags      = UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                           UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                           UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                           UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                           UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | ucx::iface_flag_inter_node;
    if (iface->reads) {
        attr->cap.flags |= UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY;
    }
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV | UCT_IFACE_FLAG_EVENT_FD;
    if (iface->max_inline >= sizeof(uint64_t)) {
        attr->cap.flags |= UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_PUT_SHORT;
        // (UCT's max_short counts the 8-byte header: header + payload fit it)
        attr->cap.am.max_short  = iface->max_inline;
        attr->cap.put.max_short = iface->max_inline;
    }
    attr->cap.am.max_bcopy       = seg;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = seg;
    attr->cap.am.max_hdr         = am_zcopy_max_hdr;
    attr->cap.am.max_iov         = am_zcopy_max_iov;
    attr->cap.am.opt_zcopy_align = 512;
    attr->cap.am.align_mtu       = iface->super.port->mtu_bytes;

    attr->cap.put.max_bcopy       = seg;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = max_msg;
    attr->cap.put.max_iov         = iov_max;
    attr->cap.put.opt_zcopy_align = 512;
    attr->cap.put.align_mtu       = iface->super.port->mtu_bytes;

    attr->cap.get.max_bcopy       = seg;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = max_msg;
    attr->cap.get.max_iov         = iov_max;
    attr->cap.get.opt_zcopy_align = 512;
    attr->cap.get.align_mtu       = iface->super.port->mtu_bytes;

    if (iface->atomics) {
        attr->cap.flags           |= UCT_IFACE_FLAG_ATOMIC_DEVICE;
        attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD);
        attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) |
                                       UCS_BIT(UCT_ATOMIC_OP_CSWAP);
    }
    // One outstanding send work request costs the send queue slot and a
    // completion; RC acks are in hardware.
    attr->overhead = 75e-9;
    return UCS_OK;
}

ucs_status_t get_address(uct_iface_h uct_iface, uct_iface_addr_t *addr)
{
    uint32_t qpn = to_rc(uct_iface)->conn.ud_qpn();
    auto *a      = reinterpret_cast<iface_addr *>(addr);
    iface::pack_qpn(a->ud_qpn, qpn);
    return UCS_OK;
}

ucs_status_t iface_flush(uct_iface_h uct_iface, unsigned, uct_completion_t *comp)
{
    rc_iface *iface = to_rc(uct_iface);
    if (comp != nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t result = UCS_OK;
    for (rc_ep *ep : iface->slots) {
        if ((ep != nullptr) && !ep->destroyed && (ep_outstanding(ep) > 0)) {
            (void)signal_unsignaled_tail(ep); // a full queue: next call
            result = UCS_INPROGRESS;
        }
    }
    return result;
}

ucs_status_t iface_fence(uct_iface_h uct_iface, unsigned)
{
    for (rc_ep *ep : to_rc(uct_iface)->slots) {
        if (ep != nullptr) {
            ep->fence_next = true;
        }
    }
    return UCS_OK;
}

void progress_enable(uct_iface_h iface, unsigned flags)
{
    uct_base_iface_progress_enable_cb(
            &to_rc(iface)->super.super,
            reinterpret_cast<ucs_callback_t>(progress), flags);
}


ucs_status_t event_fd_get(uct_iface_h uct_iface, int *fd_p)
{
    rc_iface *iface = to_rc(uct_iface);
    *fd_p           = (iface->event_epfd >= 0) ? iface->event_epfd : iface->channel->fd;
    return UCS_OK;
}

/*
 * Wakeup: the caller progressed until idle, then arms and sleeps on the
 * channel's fd. A completion that lands between its last poll and the
 * re-arm raises no event, so after re-arming each CQ is polled once more;
 * what that finds is kept (the stash, handled first by the next progress)
 * and the caller is told to progress again (UCS_ERR_BUSY) instead of
 * sleeping through it. Connection traffic is armed the same way: a peer
 * connecting to a sleeping process must wake it.
 */
ucs_status_t event_arm(uct_iface_h uct_iface, unsigned events)
{
    rc_iface *iface = to_rc(uct_iface);
    ibv_cq *cq;
    void *ctx;
    bool busy = iface->stash_pending;

    // Acknowledge events already signalled (the fd is non-blocking), and
    // what the async side raised for the worker.
    while (ibv_get_cq_event(iface->channel.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        busy = true;
    }
    uint64_t raised;
    if ((iface->notify_fd >= 0) && (read(iface->notify_fd, &raised, sizeof(raised)) > 0)) {
        busy = true;
    }
    if (busy) {
        return UCS_ERR_BUSY;
    }
    // (The manager's CQ is the async side's when there is one: it answers
    // a connecting peer itself, and raises notify_fd for the worker.)
    if ((ibv_req_notify_cq(iface->send_cq.get(), 0) != 0) ||
        (ibv_req_notify_cq(iface->recv_cq.get(), 0) != 0) ||
        ((iface->event_epfd < 0) && (ibv_req_notify_cq(iface->conn.cq(), 0) != 0))) {
        ucs_error("%s: ibv_req_notify_cq() failed: %m",
                  iface->super.md->dev.name().c_str());
        return UCS_ERR_IO_ERROR;
    }
    // All CQs are armed whatever 'events' asks: a send completion can free
    // resources a pending request waits for, and connection traffic must
    // be answered.
    (void)events;
    int n = ibv_poll_cq(iface->recv_cq.get(), stash_len, iface->stash_rx);
    iface->stash_rx_count = (n > 0) ? static_cast<unsigned>(n) : 0;
    n = ibv_poll_cq(iface->send_cq.get(), stash_len, iface->stash_tx);
    iface->stash_tx_count = (n > 0) ? static_cast<unsigned>(n) : 0;
    iface->stash_pending  = (iface->stash_rx_count + iface->stash_tx_count > 0);
    iface::worker_scope scope(&iface->gate); // (the manager is the async side's too)
    if (iface->stash_pending ||
        iface->conn.peek() || iface->conn.busy()) {
        return UCS_ERR_BUSY;
    }
    return UCS_OK;
}

constexpr uct_iface_ops_t make_ops(bool atomics)
{
    uct_iface_ops_t ops{};
    fill_ep_ops(ops, atomics);
    ops.iface_flush              = iface_flush;
    ops.iface_fence              = iface_fence;
    ops.iface_progress_enable    = progress_enable;
    ops.iface_progress_disable   = iface::progress_disable;
    ops.iface_progress           = progress;
    ops.iface_event_fd_get       = event_fd_get;
    ops.iface_event_arm          = event_arm;
    ops.iface_close              = iface_close;
    ops.iface_query              = iface_query;
    ops.iface_get_device_address = iface::get_device_address;
    ops.iface_get_address        = get_address;
    ops.iface_is_reachable       = iface::is_reachable;
    return ops;
}

constexpr uct_iface_ops_t rc_ops_atomic = make_ops(true);
constexpr uct_iface_ops_t rc_ops_plain  = make_ops(false);

/// Where the worker's async context can run an async side: its timer's
/// channel (for the manager's CQ), and UCT's event fd as an epoll set over
/// the interface's channel and notify_fd. Without one, the manager's CQ is
/// on the interface's channel, whose fd is UCT's event fd.
ucs_status_t create_event_fd(rc_iface *iface)
{
    const char *name = iface->super.md->dev.name().c_str();
    if (iface::async_timer_channel(&iface->timer, &iface->gate,
                                   iface->super.super.worker->async,
                                   iface->super.md->dev.ctx(), "rc_zv") == nullptr) {
        return UCS_OK;
    }
    iface->event_epfd = epoll_create1(EPOLL_CLOEXEC);
    iface->notify_fd  = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if ((iface->event_epfd < 0) || (iface->notify_fd < 0)) {
        ucs_error("%s: rc_zv: the event fd: %m", name);
        return UCS_ERR_IO_ERROR;
    }
    for (int fd : {iface->channel->fd, iface->notify_fd}) {
        epoll_event ev{};
        ev.events  = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(iface->event_epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            ucs_error("%s: rc_zv: epoll_ctl(ADD) for the event fd: %m", name);
            return UCS_ERR_IO_ERROR;
        }
    }
    return UCS_OK;
}

ucs_status_t create_resources(rc_iface *iface, const uct_iface_params_t *params)
{
    const verbs::device &dev = iface->super.md->dev;
    const rc_settings &s     = iface->settings;
    const char *name         = dev.name().c_str();

    iface->channel.reset(ibv_create_comp_channel(dev.ctx()));
    if (!iface->channel) {
        ucs_error("%s: ibv_create_comp_channel() failed: %m", name);
        return UCS_ERR_IO_ERROR;
    }
    int flags = fcntl(iface->channel->fd, F_GETFL);
    if ((flags < 0) || (fcntl(iface->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        ucs_error("%s: cannot make the completion channel non-blocking: %m", name);
        return UCS_ERR_IO_ERROR;
    }
    // 1/16 of the send CQ (at least one entry) is kept for signaled tails.
    iface->tx_cq_limit = s.tx_cq_len - std::max(1u, s.tx_cq_len / 16);
    iface->send_cq.reset(ibv_create_cq(dev.ctx(), static_cast<int>(s.tx_cq_len), nullptr,
                                       iface->channel.get(), 0));
    if (iface->send_cq) {
        iface->recv_cq.reset(ibv_create_cq(dev.ctx(), static_cast<int>(s.common.rx_queue_len),
                                           nullptr, iface->channel.get(), 0));
    }
    if (!iface->send_cq || !iface->recv_cq) {
        ucs_error("%s: ibv_create_cq() failed: %m", name);
        return UCS_ERR_NO_RESOURCE;
    }

    ibv_srq_init_attr srq_attr = {};
    srq_attr.attr.max_wr       = s.common.rx_queue_len;
    srq_attr.attr.max_sge      = 1;
    iface->srq.reset(ibv_create_srq(dev.pd(), &srq_attr));
    if (!iface->srq) {
        ucs_error("%s: ibv_create_srq(max_wr=%u) failed: %m", name,
                  s.common.rx_queue_len);
        return UCS_ERR_NO_RESOURCE;
    }

    size_t headroom = (params->field_mask & UCT_IFACE_PARAM_FIELD_RX_HEADROOM) ?
                      params->rx_headroom : 0;
    const int node      = iface->super.md->locality.numa_node;
    ucs_status_t status = iface->rx_pool.init(&dev, "rc_zv receive", s.seg_size,
                                              headroom, 256, 0,
                                              IBV_ACCESS_LOCAL_WRITE, node,
                                              iface::rx_alignment(params, 0));
    if (status == UCS_OK) {
        // (A bounced operation's tx_op in the headroom: bounce_op().)
        status = iface->tx_pool.init(&dev, "rc_zv send", s.seg_size, sizeof(tx_op), 128,
                                     s.common.tx_max_bufs, IBV_ACCESS_LOCAL_WRITE, node);
    }
    if (status == UCS_OK) {
        // Send buffers first: receive buffers take what locked memory is
        // left (see the ring's fill below).
        status = iface->tx_pool.reserve();
    }
    if (status != UCS_OK) {
        return status;
    }
    iface->release_desc.super.cb = release_rx;
    iface->release_desc.owner    = iface;

    // Probe the inline size the device grants with a throw-away QP.
    verbs::connected_qp_params qp_params;
    qp_params.type        = IBV_QPT_RC;
    qp_params.max_send_wr = s.common.tx_queue_len;
    qp_params.max_inline  = s.max_inline;
    qp_params.send_cq     = iface->send_cq.get();
    qp_params.recv_cq     = iface->recv_cq.get();
    qp_params.srq         = iface->srq.get();
    verbs::qp probe;
    status = verbs::create_connected_qp(dev, qp_params, &probe, &iface->max_inline);
    if (status != UCS_OK) {
        return status;
    }
    probe.reset();

    // UCX_RC_ZV_MAX_RD_ATOMIC, capped to the device; peers are told what
    // our QPs serve, and issue no more than that (verbs::connect_qp).
    const verbs::rc_timing asked = iface->settings.timing;
    iface->settings.timing       = verbs::cap_to_device(asked, dev.attr().orig_attr);
    const verbs::rc_timing &t    = iface->settings.timing;
    iface->reads   = (t.max_rd_atomic > 0) && (t.max_dest_rd_atomic > 0);
    iface->atomics = iface->reads && (dev.attr().orig_attr.atomic_cap != IBV_ATOMIC_NONE);
    if ((t.max_rd_atomic != asked.max_rd_atomic) ||
        (t.max_dest_rd_atomic != asked.max_dest_rd_atomic)) {
        ucs_debug("%s: UCX_RC_ZV_MAX_RD_ATOMIC=%u capped to the device: %u issued, "
                  "%u served at a time%s", name, asked.max_rd_atomic, t.max_rd_atomic,
                  t.max_dest_rd_atomic, iface->reads ? "" : ": no RDMA READ, no atomics");
    }

    iface::conn_callbacks cb = {iface,           accept_passive,    connect_ep_qp,
                                connection_established, connection_failed, nullptr,
                                probe_qp};
    status = create_event_fd(iface);
    if (status != UCS_OK) {
        return status;
    }
    ibv_comp_channel *conn_channel = (iface->event_epfd >= 0) ? iface->timer.channel.get() :
                                                                iface->channel.get();
    status = iface->conn.init(&iface->super, IBV_QPT_RC, cb, s.conn_timeout, conn_channel,
                              "UCX_RC_ZV_MAX_PEER_CONNS", true, t.max_dest_rd_atomic);
    if (status != UCS_OK) {
        return status;
    }
    iface->rx_ring.init(&iface->rx_pool, iface->srq.get(), nullptr, s.common.rx_queue_len,
                        s.rx_batch);
    status = iface->rx_ring.fill(name, "rc_zv", "UCX_RC_ZV_RX_QUEUE_LEN");
    if (status != UCS_OK) {
        return status;
    }
    arm_srq_limit(iface);
    return UCS_OK;
}

} // namespace

void handle_event(iface::zv_iface *base, const verbs::async_event &ev)
{
    rc_iface *iface = reinterpret_cast<rc_iface *>(base);
    progress_guard guard(iface); // error callbacks may destroy endpoints
    switch (ev.what) {
    case verbs::async_event::kind::srq_limit:
        if (ev.srq == iface->srq.get()) {
            refill_srq(iface);
        }
        break;
    case verbs::async_event::kind::qp_fatal:
        for (rc_ep *ep : iface->slots) {
            if ((ep != nullptr) && !ep->destroyed && (ep->st != rc_ep::state::failed) &&
                (ep->qp != nullptr) && (ep->qp->qp_num == ev.qp_num)) {
                char why[64];
                snprintf(why, sizeof(why), "rc_zv qp 0x%x: fatal error", ev.qp_num);
                ep_fail(ep, UCS_ERR_IO_ERROR, why);
                break;
            }
        }
        break;
    case verbs::async_event::kind::device_fatal:
        iface->super.device_lost = true;
        // By index: an error callback may destroy endpoints (they stay
        // allocated until the guard ends, marked destroyed).
        for (size_t i = 0; i < iface->slots.size(); ++i) {
            rc_ep *ep = iface->slots[i];
            if ((ep != nullptr) && !ep->destroyed && (ep->st != rc_ep::state::failed)) {
                if (ep->st == rc_ep::state::connecting) {
                    iface->connecting.erase(ep->conn_id);
                }
                ep_fail(ep, UCS_ERR_IO_ERROR, "rc_zv: the device is lost");
            }
        }
        break;
    default:
        break; // port events: endpoints fail by their own timeouts, if at all
    }
}

bool op_grow(rc_iface *iface)
{
    constexpr unsigned chunk = 256;
    tx_op *ops = new (std::nothrow) tx_op[chunk];
    if (ops == nullptr) {
        return false;
    }
    if (util::try_alloc([&] { iface->op_chunks.push_back(ops); }) != UCS_OK) {
        delete[] ops;
        return false;
    }
    for (unsigned i = 0; i < chunk; ++i) {
        ops[i].next     = iface->free_ops;
        iface->free_ops = &ops[i];
    }
    return true;
}

ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                        const uct_iface_params_t *params,
                        const uct_iface_config_t *config,
                        const rc_settings &settings, uct_iface_h *iface_p)
{
    auto *iface = new (std::nothrow) rc_iface{};
    if (iface == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    md::zv_md *zmd  = md::from_uct(md);
    bool atomics    = (zmd->dev.attr().orig_attr.atomic_cap != IBV_ATOMIC_NONE);
    ucs_status_t status = iface::init(&iface->super,
                                      atomics ? &rc_ops_atomic : &rc_ops_plain,
                                      &iface::internal_ops<ep_is_connected>, md, worker,
                                      params, config, settings.common);
    if (status != UCS_OK) {
        delete iface;
        return status;
    }
    iface->settings       = settings;
    iface->super.tl_name  = "rc_zv";
    status          = create_resources(iface, params);
    if (status != UCS_OK) {
        iface_close(&iface->super.super.super); // what create_resources() made
        return status;
    }
    // A peer costs one QP with a full send queue: our endpoint's and the
    // peer's endpoint towards us share it (iface/conn.h). Two endpoints
    // that did not pair (one side recreated its endpoint while the other
    // kept its own) cost two.
    iface::conn_cost cost;
    cost.qps         = 1;
    cost.sq_wrs      = settings.common.tx_queue_len;
    cost.wqe_bytes   = iface::wqe_bytes(verbs::connected_qp_params{}.max_send_sge,
                                        iface->max_inline);
    cost.state_bytes = sizeof(rc_ep);
    iface::set_auto_max_eps(&iface->super, cost, "rc_zv");
    status = iface::watch_events(&iface->super, handle_event);
    if (status != UCS_OK) {
        iface_close(&iface->super.super.super);
        return status;
    }
    async_open(iface);
    ucs_debug("%s:%u: rc_zv iface %p: srq %u buffers of %u bytes, max inline %u, "
              "connection qp 0x%x", zmd->dev.name().c_str(), iface->super.port->port_num,
              iface, iface->rx_ring.posted(), settings.seg_size, iface->max_inline,
              iface->conn.ud_qpn());
    *iface_p = &iface->super.super.super;
    return UCS_OK;
}

} // namespace zv::rc
