// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the async side of the reliable-datagram
// core (see rd_async.h for the handshake with the worker).
#include "rd/rd_ep.h"

#include <ucs/async/async.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace zv::rd {

namespace {

/// How often the async side looks whether the worker still progresses. A
/// rank that computes is answered within two ticks: far inside the
/// peers' retransmission and connection timeouts (seconds), and a tick
/// that finds the worker progressing costs one system call.
constexpr double async_tick_seconds = 0.1;
/// Most progress calls of one tick.
constexpr unsigned async_max_calls = 256;

/// The membarrier(2) command the async side issues: the expedited private
/// one (IPIs to the CPUs that run this process's threads) once the process
/// registered for it, else the global one (slower; fine for a tick); 0 when
/// the kernel has neither.
int barrier_cmd()
{
    static int cmd = -1;
    static std::once_flag once;
    std::call_once(once, [] {
        long mask = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        cmd       = 0;
        if (mask < 0) {
            return;
        }
        if ((mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)) {
            cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
        } else if (mask & MEMBARRIER_CMD_GLOBAL) {
            cmd = MEMBARRIER_CMD_GLOBAL;
        }
    });
    return cmd;
}

/// The async side's half of the handshake: true when it may run the core.
bool async_try_enter(async_gate *g, int cmd)
{
    g->async_in.store(true, std::memory_order_relaxed);
    if (syscall(__NR_membarrier, cmd, 0, 0) != 0) {
        g->async_in.store(false, std::memory_order_release);
        return false;
    }
    if (g->worker_depth.load(std::memory_order_acquire) != 0) {
        g->async_in.store(false, std::memory_order_release);
        return false; // the worker is inside: it progresses
    }
    return true;
}

void async_leave(async_gate *g)
{
    g->async_in.store(false, std::memory_order_release);
}

/// The timer: run the interface's progress for a worker that has not
/// progressed since the last tick.
void async_tick(int, ucs_event_set_types_t, void *arg)
{
    auto *iface = static_cast<rd_iface *>(arg);
    async_state &as = iface->as;
    if (!async_try_enter(&as.gate, barrier_cmd())) {
        return;
    }
    if (iface->progress_count != as.seen_count) {
        as.seen_count = iface->progress_count; // the worker progresses
        async_leave(&as.gate);
        return;
    }
    as.active = true;
    ++as.runs;
    // What waited for a tick can be a burst (connection requests, a
    // window of packets): progress until nothing more is found, within
    // a bound, as a worker would on its next calls.
    for (unsigned i = 0; (i < async_max_calls) && (iface->core_progress(iface) > 0); ++i) {
    }
    as.active     = false;
    as.seen_count = iface->progress_count;
    async_leave(&as.gate);
}

deferred_op &push(rd_iface *iface, deferred_op::kind what)
{
    async_state &as = iface->as;
    as.deferred.emplace_back();
    as.waiting = true;
    deferred_op &op = as.deferred.back();
    op.what         = what;
    return op;
}

} // namespace

void async_wait(async_gate *g)
{
    // The async side runs the core (bounded: one progress call); the
    // worker's raised depth keeps it from starting again.
    while (g->async_in.load(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield" ::: "memory");
#endif
    }
}

void async_open(rd_iface *iface, unsigned (*core)(rd_iface *iface))
{
    async_state &as      = iface->as;
    iface->core_progress = core;
    as.max_deferred_ams  = iface->settings.common.rx_queue_len;
    ucs_async_context_t *async = iface->super.super.worker->async;
    const char *tl             = iface->tl->name;
    if (async == nullptr) {
        ucs_diag("%s: the worker has no async context: no progress while the "
                 "application computes", tl);
        return;
    }
    if (async->mode != UCS_ASYNC_MODE_THREAD_SPINLOCK &&
        async->mode != UCS_ASYNC_MODE_THREAD_MUTEX) {
        // A signal handler would poll the device and allocate inside
        // whatever the interrupted thread was doing.
        ucs_diag("%s: UCX_ASYNC_MODE=%s: no progress while the application "
                 "computes (it needs UCX_ASYNC_MODE=thread)", tl,
                 ucs_async_mode_names[async->mode]);
        return;
    }
    if (barrier_cmd() == 0) {
        ucs_diag("%s: membarrier(2) is not available: no progress while the "
                 "application computes", tl);
        return;
    }
    ucs_status_t status = ucs_async_add_timer(async->mode,
                                              ucs_time_from_sec(async_tick_seconds),
                                              async_tick, iface, async, &as.timer_id);
    if (status != UCS_OK) {
        ucs_diag("%s: no async timer (%s): no progress while the application "
                 "computes", tl, ucs_status_string(status));
        as.timer_id = -1;
    }
}

void async_close(rd_iface *iface)
{
    async_state &as = iface->as;
    if (as.timer_id < 0) {
        return; // never started, or closed already (nothing deferred then)
    }
    ucs_async_remove_handler(as.timer_id, 1); // waits for a running tick
    as.timer_id = -1;
    for (size_t i = as.head; i < as.deferred.size(); ++i) {
        if ((as.deferred[i].what == deferred_op::kind::am) && (as.deferred[i].buf != nullptr)) {
            iface::buffer_pool::put(as.deferred[i].buf);
        }
    }
    as.deferred.clear();
    as.head    = 0;
    as.waiting = false;
    ucs_debug("%s iface %p: the async side ran the core %lu times, accepted %lu active "
              "messages, refused %lu", iface->tl->name, iface, as.runs, as.ams, as.refused);
}

bool async_defer_am(rd_iface *iface, uint8_t am_id, iface::buffer *b, unsigned length)
{
    async_state &as = iface->as;
    if (as.deferred_ams >= as.max_deferred_ams) {
        ++as.refused;
        return false;
    }
    deferred_op &op = push(iface, deferred_op::kind::am);
    op.am_id        = am_id;
    op.buf          = b;
    op.length       = length;
    ++as.deferred_ams;
    ++as.ams;
    return true;
}

void async_defer_completion(rd_iface *iface, uct_completion_t *comp, ucs_status_t status,
                            uint32_t ep_id)
{
    deferred_op &op = push(iface, deferred_op::kind::completion);
    op.comp         = comp;
    op.status       = status;
    op.ep_id        = ep_id;
}

void async_defer_ep_fail(rd_iface *iface, uint32_t ep_id, ucs_status_t status, const char *why)
{
    deferred_op &op = push(iface, deferred_op::kind::ep_fail);
    op.ep_id        = ep_id;
    op.status       = status;
    op.why          = why;
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
                ep_fail(ep, op.status, op.why.c_str());
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
