// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: how the worker and the async side of an
// interface take turns (one copy for every transport).
#ifndef ZV_IFACE_ASYNC_GATE_H
#define ZV_IFACE_ASYNC_GATE_H

#include <ucs/async/async_fwd.h>

#include <atomic>

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
 * - the worker, at each entry point, raises 'worker_depth' (a plain store,
 *   then a compiler barrier) and then looks at 'async_in' (a load and a
 *   predicted branch); it lowers the depth when it leaves;
 * - the async side raises 'async_in', then runs membarrier(2), which puts
 *   a full memory barrier into every running thread of the process, and
 *   only then looks at 'worker_depth': if it is up, the worker is inside
 *   (so it is progressing) and the async side backs off.
 * The barrier orders the worker's store before its load without the worker
 * executing one: either the worker sees 'async_in' and waits until the
 * async side is done, or the async side sees the depth and leaves.
 */
struct async_gate {
    std::atomic<unsigned> worker_depth{0}; ///< written by the worker only
    std::atomic<bool>     async_in{false}; ///< written by the async side only
};

/// The worker waits for the async side to finish (out of line, cold).
void async_wait(async_gate *g);

inline void worker_enter(async_gate *g)
{
    g->worker_depth.store(g->worker_depth.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(g->async_in.load(std::memory_order_acquire), 0)) {
        async_wait(g);
    }
}

inline void worker_leave(async_gate *g)
{
    g->worker_depth.store(g->worker_depth.load(std::memory_order_relaxed) - 1,
                          std::memory_order_release);
}

/// An entry point of the worker into what the async side also runs.
class worker_scope {
public:
    explicit worker_scope(async_gate *g) : m_gate(g) { worker_enter(g); }
    ~worker_scope() { worker_leave(m_gate); }
    worker_scope(const worker_scope &)            = delete;
    worker_scope &operator=(const worker_scope &) = delete;

private:
    async_gate *m_gate;
};

/// The async side's half of the handshake: true when it may run (the
/// worker is not inside); it then calls async_leave() when done.
[[nodiscard]] bool async_try_enter(async_gate *g);
void async_leave(async_gate *g);

/// A periodic timer in the worker's async context ('tl' names the
/// transport in the messages); -1 where there can be none: no async
/// context, signal mode (a signal handler would poll the device and
/// allocate inside whatever the interrupted thread was doing), no
/// membarrier(2). Each is said at diag level: the interface then works
/// as before, progressing only when the worker does.
[[nodiscard]] int async_timer_start(ucs_async_context_t *async, const char *tl,
                                    ucs_async_event_cb_t cb, void *arg);
/// Remove the timer (waits for a running tick) and set *timer_id to -1.
void async_timer_stop(int *timer_id);

} // namespace zv::iface

#endif
