// SPDX-License-Identifier: BSD-3-Clause
// rc_zv: progress without the application. While the worker is away, the
// async side runs the connection manager, so that a rank that computes
// answers connection requests, completes its own and closes what its peers
// close. Data needs no help: a peer's device acknowledges every RC packet
// whether or not its process progresses, and a receiver whose shared
// receive queue ran dry answers receiver-not-ready, which the sender
// retries without end (rnr_retry 7) until the worker is back and reposts.
#include "rc/rc_ep.h"

#include <ucs/debug/log_def.h>

#include <unistd.h>

namespace zv::rc {

namespace {

/// Most connection progress calls of one tick (a burst of requests).
constexpr unsigned async_max_calls = 256;

/// The manager has nothing in hand (no handshake, close or probe under
/// way) and the worker nothing to hear: the timer may sleep.
bool idle(const rc_iface *iface)
{
    return !iface->conn.busy() && iface->async_outcomes.empty();
}

void async_tick(int, ucs_event_set_types_t, void *arg)
{
    auto *iface = static_cast<rc_iface *>(arg);
    // A worker that progresses costs this tick a load and a clock read:
    // no barrier, no gate.
    if (!iface::worker_away(&iface->async_watch,
                            iface->progress_count.load(std::memory_order_relaxed))) {
        return;
    }
    if (!iface::async_try_enter(&iface->gate)) {
        return;
    }
    if (iface->progress_count.load(std::memory_order_relaxed) == iface->async_watch.count) {
        // Away since the last tick: the manager's callbacks into the
        // transport only record (connection_established/failed), the
        // worker's next progress call acts on them.
        iface->async_active = true;
        for (unsigned i = 0; (i < async_max_calls) && (iface->conn.progress() > 0); ++i) {
        }
        // Nothing in hand: the timer sleeps until a connection message
        // comes (iface::async_timer); the arming first, then one more run.
        ibv_cq *const cq = iface->conn.cq();
        if (idle(iface) && iface::async_timer_arm(&iface->timer, &cq, 1) &&
            (iface->conn.progress() == 0) && idle(iface)) {
            iface::async_timer_sleep(&iface->timer);
        }
        iface->async_active = false;
        if (!iface->async_outcomes.empty()) {
            iface->conn.wake();
            // A worker that waits for events hears it (event_arm reads it).
            const uint64_t one = 1;
            if ((iface->notify_fd >= 0) && (write(iface->notify_fd, &one, sizeof(one)) < 0)) {
                ucs_diag("rc_zv: raising the event fd: %m");
            }
        }
    }
    iface->async_watch.count = iface->progress_count.load(std::memory_order_relaxed);
    iface::async_leave(&iface->gate);
}

} // namespace

void async_open(rc_iface *iface)
{
    iface::async_timer_begin(&iface->timer, async_tick, iface);
}

void async_close(rc_iface *iface)
{
    iface::async_timer_end(&iface->timer);
    iface->async_outcomes.clear(); // their endpoints are being destroyed too
    iface->async_head = 0;
}

unsigned progress_conn(rc_iface *iface)
{
    iface::worker_scope scope(&iface->gate);
    unsigned count = 0;
    if (__builtin_expect(!iface->async_outcomes.empty(), 0)) { // (cleared once handed over)
        // One at a time: a callback may progress the worker again, and the
        // nested call takes the next. Cleared, not freed: the room stays.
        while (iface->async_head < iface->async_outcomes.size()) {
            const async_outcome o = iface->async_outcomes[iface->async_head++];
            if (o.status == UCS_OK) {
                connection_established(iface, o.conn_id, o.peer_qpn);
            } else {
                connection_failed(iface, o.conn_id, o.status, o.why);
            }
            ++count;
        }
        iface->async_outcomes.clear();
        iface->async_head = 0;
    }
    return count + iface->conn.progress();
}

} // namespace zv::rc
