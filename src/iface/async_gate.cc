// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the handshake's async half and the
// timer (see async_gate.h).
#include "iface/async_gate.h"

#include <ucs/async/async.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <linux/membarrier.h>
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
    // The async side runs (bounded); the worker's raised depth keeps it
    // from starting again.
    while (g->async_in.load(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield" ::: "memory");
#endif
    }
}

bool async_try_enter(async_gate *g)
{
    g->async_in.store(true, std::memory_order_relaxed);
    if (syscall(__NR_membarrier, barrier_cmd(), 0, 0) != 0) {
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

int async_timer_start(ucs_async_context_t *async, const char *tl, ucs_async_event_cb_t cb,
                      void *arg)
{
    if (async == nullptr) {
        ucs_diag("%s: the worker has no async context: no progress while the "
                 "application computes", tl);
        return -1;
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
        return -1;
    }
    if (async->mode != UCS_ASYNC_MODE_THREAD_SPINLOCK &&
        async->mode != UCS_ASYNC_MODE_THREAD_MUTEX) {
        ucs_diag("%s: UCX_ASYNC_MODE=%s: no progress while the application "
                 "computes (it needs UCX_ASYNC_MODE=thread)", tl,
                 ucs_async_mode_names[async->mode]);
        return -1; // (poll: a context without a thread, as tests make)
    }
    if (barrier_cmd() == 0) {
        ucs_diag("%s: membarrier(2) is not available: no progress while the "
                 "application computes", tl);
        return -1;
    }
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

void async_timer_stop(int *timer_id)
{
    if (*timer_id >= 0) {
        ucs_async_remove_handler(*timer_id, 1); // waits for a running tick
        *timer_id = -1;
    }
}

} // namespace zv::iface
