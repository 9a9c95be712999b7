// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the async side of the reliable-datagram
// core (see rd_async.h for the handshake with the worker).
#include "rd/rd_ep.h"

#include <ucs/debug/log_def.h>

#include <cstdio>

namespace zv::rd {

namespace {

/// Most progress calls of one tick.
constexpr unsigned async_max_calls = 256;

/// Nothing for a timer to do until a packet comes: nothing unacknowledged
/// or being connected (busy_eps), no ack owed, no request pending, no
/// endpoint waiting for its sends, a full receive ring, and nothing of the
/// transport's own. (Messages deferred for the worker need no timer.)
bool idle(const rd_iface *iface)
{
    return (iface->busy_eps == nullptr) && (iface->owe_conns == nullptr) &&
           (iface->pending_eps == nullptr) && iface->graveyard.empty() &&
           (iface->parked == nullptr) && (iface->settling == nullptr) &&
           !iface->rx_ring.starved() && iface->tl->idle(iface);
}

/// The timer: run the interface's progress for a worker that has not
/// progressed since the last tick; let the timer sleep if that leaves the
/// interface idle (iface::async_timer).
void async_tick(int, ucs_event_set_types_t, void *arg)
{
    auto *iface = static_cast<rd_iface *>(arg);
    async_state &as = iface->as;
    // A worker that progresses costs this tick a load and a clock read:
    // no barrier, no gate.
    if (!iface::worker_away(&as.watch, iface->progress_count.load(std::memory_order_relaxed))) {
        return;
    }
    if (!iface::async_try_enter(&as.gate)) {
        return;
    }
    if (iface->progress_count.load(std::memory_order_relaxed) == as.watch.count) {
        as.active = true;
        rx_limit_update(iface);
        ++as.runs;
        // What waited for a tick can be a burst (connection requests, a
        // window of packets): progress until nothing more is found, within
        // a bound, as a worker would on its next calls.
        for (unsigned i = 0; (i < async_max_calls) && (iface->core_progress(iface) > 0); ++i) {
        }
        // A packet that came before the CQs were armed raises no event:
        // once armed, a run that finds nothing means none came.
        ibv_cq *const cqs[] = {iface->recv_cq.get(), iface->conn_cq};
        if (idle(iface) && iface::async_timer_arm(&as.timer, cqs, 2) &&
            (iface->core_progress(iface) == 0) && idle(iface)) {
            iface::async_timer_sleep(&as.timer);
        }
        as.active = false;
        rx_limit_update(iface);
    }
    as.watch.count = iface->progress_count.load(std::memory_order_relaxed); // (its own calls)
    iface::async_leave(&as.gate);
}

/// A new record, or null when out of memory. Room was made at open and
/// for each endpoint (async_state::deferred); growing is a cold fallback.
deferred_op *push(rd_iface *iface, deferred_op::kind what)
{
    async_state &as = iface->as;
    if (__builtin_expect(as.deferred.size() == as.deferred.capacity(), 0) &&
        (util::try_alloc([&] { util::reserve_at_least(as.deferred, as.deferred.size() + 1); }) !=
         UCS_OK)) {
        return nullptr;
    }
    as.deferred.emplace_back();
    as.waiting = true;
    deferred_op &op = as.deferred.back();
    op.what         = what;
    return &op;
}

} // namespace

void async_open(rd_iface *iface, unsigned (*core)(rd_iface *iface))
{
    async_state &as      = iface->as;
    iface->core_progress = core;
    as.max_deferred_ams  = iface->settings.common.rx_queue_len;
    iface::async_timer_begin(&as.timer, async_tick, iface);
}

void async_close(rd_iface *iface)
{
    async_state &as = iface->as;
    if (as.timer.closing) {
        return; // closed already
    }
    iface::async_timer_end(&as.timer);
    for (size_t i = as.head; i < as.deferred.size(); ++i) {
        if ((as.deferred[i].what == deferred_op::kind::am) && (as.deferred[i].buf != nullptr)) {
            iface::buffer_pool::put(as.deferred[i].buf);
        }
    }
    as.deferred.clear();
    as.head    = 0;
    as.waiting = false;
    ucs_debug("%s iface %p: the async side ran the core %lu times, accepted %lu active "
              "messages, refused %lu; its timer slept %lu times, woken %lu times by a "
              "packet", iface->tl->name, iface, as.runs, as.ams, as.refused, as.timer.sleeps,
              as.timer.wakes_by_event);
}

bool async_defer_am(rd_iface *iface, uint8_t am_id, iface::buffer *b, unsigned length)
{
    async_state &as = iface->as;
    if (as.deferred_ams >= as.max_deferred_ams) {
        ++as.refused;
        return false;
    }
    deferred_op *op = push(iface, deferred_op::kind::am);
    if (op == nullptr) {
        ++as.refused; // (out of memory: its sender retransmits it)
        return false;
    }
    op->am_id  = am_id;
    op->buf    = b;
    op->length = length;
    ++as.deferred_ams;
    ++as.ams;
    return true;
}

void async_defer_completion(rd_iface *iface, uct_completion_t *comp, ucs_status_t status,
                            uint32_t ep_id)
{
    deferred_op *op = push(iface, deferred_op::kind::completion);
    if (op == nullptr) {
        ucs_error("%s iface %p: out of memory: a send's completion is lost", iface->tl->name,
                  iface);
        return;
    }
    op->comp   = comp;
    op->status = status;
    op->ep_id  = ep_id;
}

void async_defer_ep_fail(rd_iface *iface, uint32_t ep_id, ucs_status_t status, const char *why)
{
    deferred_op *op = push(iface, deferred_op::kind::ep_fail);
    if (op == nullptr) {
        return; // (out of memory: the worker's own timers fail it)
    }
    op->ep_id  = ep_id;
    op->status = status;
    std::snprintf(op->why, sizeof(op->why), "%s", why);
}

void async_forget_ep(rd_iface *iface, uint32_t ep_id)
{
    async_state &as = iface->as;
    for (size_t i = as.head; i < as.deferred.size(); ++i) {
        deferred_op &op = as.deferred[i];
        if (op.ep_id != ep_id) {
            continue;
        }
        if (op.what == deferred_op::kind::completion) {
            uct_invoke_completion(op.comp, op.status);
            op.what = deferred_op::kind::done;
        } else if (op.what == deferred_op::kind::ep_fail) {
            op.what = deferred_op::kind::done;
        }
    }
}

unsigned async_hand_over(rd_iface *iface)
{
    async_state &as = iface->as;
    unsigned count  = 0;
    // A handler may progress the worker again: this loop and a nested one
    // take the next record each, so the order holds.
    while (as.head < as.deferred.size()) {
        deferred_op op = std::move(as.deferred[as.head++]);
        switch (op.what) {
        case deferred_op::kind::am:
            --as.deferred_ams;
            if (!invoke_am(iface, op.am_id, op.buf, op.length)) {
                iface::buffer_pool::put(op.buf);
            }
            break;
        case deferred_op::kind::completion:
            uct_invoke_completion(op.comp, op.status);
            break;
        case deferred_op::kind::ep_fail: {
            rd_ep *ep = iface->eps.find(op.ep_id);
            if (ep != nullptr) {
                ep_fail(ep, op.status, op.why);
            }
            break;
        }
        case deferred_op::kind::done:
            break;
        }
        ++count;
    }
    as.deferred.clear();
    as.head    = 0;
    as.waiting = false;
    return count;
}

} // namespace zv::rd
