// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the handshake's async half and the
// timer (see async_gate.h).
#include "iface/async_gate.h"

#include <ucs/async/async.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <infiniband/verbs.h>
#include <linux/membarrier.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace zv::iface {

namespace {

/// How often the async side looks whether the worker still progresses. A
/// rank that computes is answered within two ticks: far inside the
/// peers' retransmission and connection timeouts (seconds), and a tick
/// that finds the worker progressing costs one system call.
constexpr double async_tick_seconds = 0.1;

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

} // namespace

void async_wait(async_gate *g)
{
    // A sleeping timer first (what the worker is about to do may need it);
    // then the async side runs (bounded); the worker's raised flag keeps
    // it from starting again.
    if (g->async_in.load(std::memory_order_acquire) & async_gate::asleep) {
        g->wake(g->wake_arg);
    }
    while (g->async_in.load(std::memory_order_acquire) & async_gate::running) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield" ::: "memory");
#endif
    }
}

bool worker_away(worker_watch *w, unsigned count)
{
    const ucs_time_t now = ucs_get_time();
    if (count != w->count) {
        w->count = count;
        w->since = now;
        return false;
    }
    return now - w->since >= ucs_time_from_sec(async_tick_seconds / 2);
}

bool async_try_enter(async_gate *g)
{
    g->async_in.fetch_or(async_gate::running, std::memory_order_relaxed);
    if (syscall(__NR_membarrier, barrier_cmd(), 0, 0) != 0) {
        g->async_in.fetch_and(~async_gate::running, std::memory_order_release);
        return false;
    }
    if (g->worker_in.load(std::memory_order_acquire)) {
        g->async_in.fetch_and(~async_gate::running, std::memory_order_release);
        return false; // the worker is inside: it progresses
    }
    return true;
}

void async_leave(async_gate *g)
{
    g->async_in.fetch_and(~async_gate::running, std::memory_order_release);
}

namespace {

/// Whether the worker's async context can run an async side ('tl' names
/// the transport in the messages, which say why not).
bool async_possible(ucs_async_context_t *async, const char *tl)
{
    if (async == nullptr) {
        ucs_diag("%s: the worker has no async context: no progress while the "
                 "application computes", tl);
        return false;
    }
    if (async->mode == UCS_ASYNC_MODE_SIGNAL) {
        // Said once per process: the user asked for this mode, and a peer
        // will give up on a rank that computes past its timeout.
        static std::once_flag once;
        std::call_once(once, [tl] {
            ucs_warn("%s: UCX_ASYNC_MODE=signal: zv transports do not answer their "
                     "peers while the application computes (that needs "
                     "UCX_ASYNC_MODE=thread, the default)", tl);
        });
        return false;
    }
    if (async->mode != UCS_ASYNC_MODE_THREAD_SPINLOCK &&
        async->mode != UCS_ASYNC_MODE_THREAD_MUTEX) {
        ucs_diag("%s: UCX_ASYNC_MODE=%s: no progress while the application "
                 "computes (it needs UCX_ASYNC_MODE=thread)", tl,
                 ucs_async_mode_names[async->mode]);
        return false; // (poll: a context without a thread, as tests make)
    }
    if (barrier_cmd() == 0) {
        ucs_diag("%s: membarrier(2) is not available: no progress while the "
                 "application computes", tl);
        return false;
    }
    return true;
}

int add_timer(ucs_async_context_t *async, const char *tl, ucs_async_event_cb_t cb, void *arg)
{
    int id              = -1;
    ucs_status_t status = ucs_async_add_timer(async->mode,
                                              ucs_time_from_sec(async_tick_seconds), cb,
                                              arg, async, &id);
    if (status != UCS_OK) {
        ucs_diag("%s: no async timer (%s): no progress while the application "
                 "computes", tl, ucs_status_string(status));
        return -1;
    }
    return id;
}

/// Remove a timer (waits for a running tick) and set *timer_id to -1.
void async_timer_stop(int *timer_id)
{
    if (*timer_id >= 0) {
        ucs_async_remove_handler(*timer_id, 1); // waits for a running tick
        *timer_id = -1;
    }
}

/// Read and acknowledge every event the channel holds (its fd is
/// non-blocking); how many.
unsigned drain(ibv_comp_channel *channel)
{
    unsigned n = 0;
    ibv_cq *cq;
    void *ctx;
    while (ibv_get_cq_event(channel, &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        ++n;
    }
    return n;
}

/// Wake a sleeping timer (the caller holds t->lock); true if it slept.
bool wake_locked(async_timer *t)
{
    if (!t->asleep || t->closing) {
        return false;
    }
    t->timer_id = add_timer(t->async, t->tl, t->tick, t->arg);
    t->asleep   = false;
    t->gate->async_in.fetch_and(~async_gate::asleep, std::memory_order_release);
    return true;
}

/// The worker's entry point found the timer asleep.
void wake(void *arg)
{
    auto *t = static_cast<async_timer *>(arg);
    std::lock_guard<std::mutex> guard(t->lock);
    wake_locked(t);
}

/// A completion on an armed CQ: the timer again, and a tick at once.
void on_event(int, ucs_event_set_types_t, void *arg)
{
    auto *t = static_cast<async_timer *>(arg);
    drain(t->channel.get());
    bool woke;
    {
        std::lock_guard<std::mutex> guard(t->lock);
        woke = wake_locked(t);
        t->wakes_by_event += woke;
    }
    if (woke) {
        t->tick(t->timer_id, UCS_EVENT_SET_EVREAD, t->arg);
    }
}

} // namespace


ibv_comp_channel *async_timer_channel(async_timer *t, async_gate *g,
                                      ucs_async_context_t *async, ibv_context *ctx,
                                      const char *tl)
{
    t->gate  = g;
    t->async = async;
    t->tl    = tl;
    if (!async_possible(async, tl)) {
        return nullptr;
    }
    t->channel.reset(ibv_create_comp_channel(ctx));
    if (!t->channel) {
        ucs_diag("%s: ibv_create_comp_channel() failed: %m: no progress while the "
                 "application computes", tl);
        return nullptr;
    }
    int flags = fcntl(t->channel->fd, F_GETFL);
    if ((flags < 0) || (fcntl(t->channel->fd, F_SETFL, flags | O_NONBLOCK) != 0)) {
        ucs_diag("%s: a non-blocking completion channel: %m: no progress while the "
                 "application computes", tl);
        t->channel.reset();
    }
    return t->channel.get();
}

void async_timer_begin(async_timer *t, ucs_async_event_cb_t tick, void *arg)
{
    t->tick = tick;
    t->arg  = arg;
    if (!t->channel) {
        return;
    }
    ucs_status_t status = ucs_async_set_event_handler(t->async->mode, t->channel->fd,
                                                      UCS_EVENT_SET_EVREAD, on_event, t,
                                                      t->async);
    if (status != UCS_OK) {
        ucs_diag("%s: no async event handler (%s): no progress while the application "
                 "computes", t->tl, ucs_status_string(status));
        return;
    }
    t->fd_added   = true;
    t->gate->wake     = wake;
    t->gate->wake_arg = t;
    std::lock_guard<std::mutex> guard(t->lock);
    t->timer_id = add_timer(t->async, t->tl, tick, arg);
}

bool async_timer_arm(async_timer *t, ibv_cq *const *cqs, unsigned n)
{
    if (!t->fd_added) {
        return false;
    }
    for (unsigned i = 0; i < n; ++i) {
        if ((cqs[i] != nullptr) && (ibv_req_notify_cq(cqs[i], 0) != 0)) {
            return false;
        }
    }
    return true;
}

void async_timer_sleep(async_timer *t)
{
    std::lock_guard<std::mutex> guard(t->lock);
    if (t->closing || t->asleep || (t->timer_id < 0)) {
        return;
    }
    // (from the timer's own tick: removed without waiting for it)
    if (ucs_async_remove_handler(t->timer_id, 0) != UCS_OK) {
        return;
    }
    t->timer_id = -1;
    t->asleep   = true;
    ++t->sleeps;
    t->gate->async_in.fetch_or(async_gate::asleep, std::memory_order_release);
}

void async_timer_end(async_timer *t)
{
    int id;
    {
        std::lock_guard<std::mutex> guard(t->lock);
        t->closing = true;
        id         = t->timer_id;
        t->timer_id = -1;
    }
    if (t->fd_added) {
        ucs_async_remove_handler(t->channel->fd, 1); // waits for a running handler
    }
    async_timer_stop(&id); // waits for a running tick
    // Nothing of the async side runs from here on.
    t->fd_added = false;
    if (t->gate != nullptr) { // (null: the interface failed before its CQs)
        t->gate->async_in.fetch_and(~async_gate::asleep, std::memory_order_release);
    }
    if (t->channel) {
        drain(t->channel.get());
    }
}

void async_timer_destroy_channel(async_timer *t)
{
    t->channel.reset();
}


} // namespace zv::iface
