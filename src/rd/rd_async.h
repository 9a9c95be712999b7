// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the reliable-datagram core answers its
// peers from the worker's async context while the application computes.
#ifndef ZV_RD_RD_ASYNC_H
#define ZV_RD_RD_ASYNC_H

#include "iface/buffer_pool.h"

#include <uct/api/uct.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace zv::rd {

/*
 * A rank that computes for minutes calls no progress. Its peers' packets
 * wait in its receive queue, nobody acknowledges them, and after TIMEOUT
 * the peers would declare it dead. So every interface of the core has a
 * timer in the worker's async context (UCX's async thread): when a tick
 * finds that the worker has not progressed since the tick before, the
 * async side runs the interface's own progress for it - receives, acks,
 * resends, connection requests, probes - with every call into UCP
 * deferred: an active message it accepts, a completion, an endpoint's
 * failure wait in 'deferred' for the worker's next progress call, which
 * hands them to UCP first, in the order they happened.
 *
 * The two sides never run the core at once, and the worker pays no lock
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

/// An entry point of the worker into an interface of the core.
class worker_scope {
public:
    explicit worker_scope(async_gate *g) : m_gate(g) { worker_enter(g); }
    ~worker_scope() { worker_leave(m_gate); }
    worker_scope(const worker_scope &)            = delete;
    worker_scope &operator=(const worker_scope &) = delete;

private:
    async_gate *m_gate;
};

/// A call into UCP that the async side made wait for the worker.
struct deferred_op {
    enum class kind : uint8_t { am, completion, ep_fail, done };
    kind              what;
    uint8_t           am_id  = 0;   ///< am
    unsigned          length = 0;   ///< am
    iface::buffer    *buf    = nullptr; ///< am: the receive buffer
    uct_completion_t *comp   = nullptr; ///< completion
    ucs_status_t      status = UCS_OK;  ///< completion, ep_fail
    uint32_t          ep_id  = 0;   ///< completion (whose), ep_fail
    std::string       why;          ///< ep_fail
};

/// What the async side of an interface keeps.
struct async_state {
    async_gate               gate;
    int                      timer_id = -1;
    /// The async side is running the core: calls into UCP are deferred.
    bool                     active   = false;
    /// progress_count when the async side last looked (under the gate).
    unsigned                 seen_count = 0;
    /// Active messages waiting in 'deferred' (they hold receive buffers).
    unsigned                 deferred_ams = 0;
    /// Most active messages the async side accepts before it leaves the
    /// rest to the sender's retransmission (it still acknowledges, so the
    /// sender knows it is alive): bounds the receive buffers it holds.
    unsigned                 max_deferred_ams = 0;
    bool                     waiting = false; ///< 'deferred' has some to hand over
    size_t                   head = 0; ///< next of 'deferred' to hand over
    std::vector<deferred_op> deferred;
    /// Statistics (debug log at close).
    uint64_t                 runs = 0, ams = 0, refused = 0;
};

} // namespace zv::rd

#endif
