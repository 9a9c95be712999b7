// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: how the worker and the async side of an
// interface take turns (one copy for every transport).
#ifndef ZV_IFACE_ASYNC_GATE_H
#define ZV_IFACE_ASYNC_GATE_H

#include "verbs/owned.h"

#include <ucs/async/async_fwd.h>
#include <ucs/time/time_def.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace zv::iface {

/*
 * A rank that computes for minutes calls no progress. So each interface
 * has a timer in the worker's async context (UCX's async thread): when a
 * tick finds that the worker has not progressed since the tick before, the
 * async side runs part of the interface's progress for it, with every call
 * into UCP deferred to the worker's next progress call.
 *
 * The two sides never run that code at once, and the worker pays no lock
 * for it (an asymmetric Dekker handshake):
 * - the worker, at each entry point, raises 'worker_in' (a plain store,
 *   then a compiler barrier) and then looks at 'async_in' (a load and a
 *   predicted branch); when it leaves, it puts back what 'worker_in' was
 *   (an entry point called from inside another, as a send from an active
 *   message handler, leaves it raised);
 * - the async side raises 'async_in', then runs membarrier(2), which puts
 *   a full memory barrier into every running thread of the process, and
 *   only then looks at 'worker_in': if it is up, the worker is inside
 *   (so it is progressing) and the async side backs off.
 * The barrier orders the worker's store before its load without the worker
 * executing one: either the worker sees 'async_in' and waits until the
 * async side is done, or the async side sees the flag and leaves.
 */
struct async_gate {
    static constexpr uint8_t running = 1; ///< async_in: the async side is inside
    static constexpr uint8_t asleep  = 2; ///< async_in: its timer sleeps (async_timer)
    std::atomic<bool>    worker_in{false}; ///< written by the worker only
    /// 'running' and 'asleep' (one load for the worker's test of both).
    std::atomic<uint8_t> async_in{0};
    /// Called by the worker that finds 'asleep' (async_timer's wake).
    void (*wake)(void *arg) = nullptr;
    void *wake_arg          = nullptr;
};

/// The worker wakes a sleeping timer and waits for the async side to
/// finish (out of line, cold).
void async_wait(async_gate *g);

/// Returns what 'worker_in' was, for worker_leave().
inline bool worker_enter(async_gate *g)
{
    const bool outer_in = g->worker_in.load(std::memory_order_relaxed);
    g->worker_in.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(g->async_in.load(std::memory_order_acquire) != 0, 0)) {
        async_wait(g);
    }
    return outer_in;
}

inline void worker_leave(async_gate *g, bool outer_in)
{
    g->worker_in.store(outer_in, std::memory_order_release);
}

/// An entry point of the worker into what the async side also runs.
class worker_scope {
public:
    explicit worker_scope(async_gate *g) : m_gate(g), m_outer_in(worker_enter(g)) {}
    ~worker_scope() { worker_leave(m_gate, m_outer_in); }
    worker_scope(const worker_scope &)            = delete;
    worker_scope &operator=(const worker_scope &) = delete;

private:
    async_gate *m_gate;
    bool        m_outer_in;
};

/// The async side's view of the worker's progress count.
struct worker_watch {
    unsigned   count = 0; ///< the count at the last tick that saw it move
    ucs_time_t since = 0; ///< when
};
/// At a tick: the worker is away when its count has not moved for half a
/// tick or more. (A timer that fires late fires again at once: two ticks
/// microseconds apart must not take a progressing worker for away, which
/// would make it wait for a run of the async side.) A tick's cost while
/// the worker progresses: a load and a clock read.
[[nodiscard]] bool worker_away(worker_watch *w, unsigned count);

/// The async side's half of the handshake: true when it may run (the
/// worker is not inside); it then calls async_leave() when done.
[[nodiscard]] bool async_try_enter(async_gate *g);
void async_leave(async_gate *g);


/*
 * A timer that sleeps while its interface has nothing outstanding, so that
 * an idle interface whose worker computes costs the async thread nothing,
 * and still answers its peers at once:
 * - the interface's receive CQs are created on 'channel', whose fd is an
 *   event handler in the async context;
 * - a tick that ran the interface for its absent worker and found nothing
 *   outstanding arms those CQs, runs it once more (a packet that came
 *   before the arming raises no event), and, if that found nothing
 *   either, removes its timer and raises the gate's 'asleep';
 * - the first completion on an armed CQ wakes it from the async thread
 *   (the timer again, and a tick at once); the worker's next entry point
 *   wakes it too (the same load that tests 'running'), since what the
 *   worker does may need the timer (a send to retransmit).
 * The timer's state is under 'lock', taken only by the async side, by
 * wake-ups and by close: never on the worker's fast path.
 */
struct async_timer {
    async_gate          *gate     = nullptr;
    ucs_async_context_t *async    = nullptr;
    const char          *tl       = nullptr;
    ucs_async_event_cb_t tick     = nullptr;
    void                *arg      = nullptr;
    int                  timer_id = -1;
    /// Null: no async side. Destroyed by async_timer_destroy_channel(),
    /// after the CQs on it, whose owners destroy them explicitly.
    verbs::comp_channel  channel;
    bool                 fd_added = false;
    std::mutex           lock;
    bool                 asleep   = false;
    bool                 closing  = false;
    uint64_t             sleeps   = 0; ///< statistics: times it went to sleep
    uint64_t             wakes_by_event = 0;
};

/// Before the interface creates its receive CQs: the channel to create
/// them on, or null where there can be no async side: no async context,
/// signal mode (a signal handler would poll the device and allocate inside
/// whatever the interrupted thread was doing), no membarrier(2). Each is
/// said at diag level: the interface then works as before, progressing
/// only when the worker does.
ibv_comp_channel *async_timer_channel(async_timer *t, async_gate *g,
                                      ucs_async_context_t *async, ibv_context *ctx,
                                      const char *tl);
/// When the interface is ready: the channel's handler and the timer. On
/// failure (said at diag level) the interface works without an async side.
void async_timer_begin(async_timer *t, ucs_async_event_cb_t tick, void *arg);
/// The tick found the interface idle: arm 'cqs' (n of them). The caller
/// then runs the interface once more and calls async_timer_sleep() if that
/// found nothing. False if they could not be armed (the timer keeps ticking).
[[nodiscard]] bool async_timer_arm(async_timer *t, ibv_cq *const *cqs, unsigned n);
/// From a tick, inside the gate, after async_timer_arm() and a run that
/// found nothing: remove the timer and raise 'asleep'.
void async_timer_sleep(async_timer *t);
/// Stop everything (waits for a running tick or event) before the CQs go.
void async_timer_end(async_timer *t);
/// After the CQs are destroyed.
void async_timer_destroy_channel(async_timer *t);

} // namespace zv::iface

#endif
