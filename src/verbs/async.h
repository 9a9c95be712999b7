// SPDX-License-Identifier: BSD-3-Clause
// A device's asynchronous events (ibv_get_async_event): what each means to
// an interface, and their fan-out from the thread that reads them to the
// interfaces that act on them.
#ifndef ZV_VERBS_ASYNC_H
#define ZV_VERBS_ASYNC_H

#include <infiniband/verbs.h>
#include <ucs/config/types.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace zv::verbs {

/// An asynchronous event, reduced to what an interface acts on. It holds
/// numbers and the SRQ's address, never a QP pointer: the event is
/// acknowledged as soon as it is read, and the QP may be gone by the time
/// an interface looks.
struct async_event {
    enum class kind : uint8_t {
        qp_fatal,     ///< a QP entered the error state: fail its endpoint
        srq_limit,    ///< an SRQ fell below its armed limit: refill it
        port_down,    ///< a port left the active state
        port_up,      ///< a port became active again
        device_fatal, ///< the device is lost: fail everything on it
        other,        ///< logged only
    };
    kind           what     = kind::other;
    ibv_event_type type     = IBV_EVENT_COMM_EST; ///< the original, for logs
    uint8_t        port_num = 0;                  ///< port events
    uint32_t       qp_num   = 0;                  ///< qp_fatal
    const ibv_srq *srq      = nullptr;            ///< srq_limit (compared only)
};

/// Translate an event read from ibv_get_async_event().
[[nodiscard]] async_event translate(const ibv_async_event &ev);

/// The level UCX logs this event at for its own devices.
[[nodiscard]] ucs_log_level_t log_level(const async_event &ev);

/// One line describing the event ("port 1 down (IBV_EVENT_PORT_ERR)").
void describe(const async_event &ev, char *buf, size_t len);

/// Fan-out of a device's events to its listeners (the interfaces opened on
/// it). deliver() runs in the thread that reads the device's events; each
/// listener gets its copy queued and, the first time since it last took
/// them, its notify callback: that schedules take() on the listener's own
/// thread and returns an opaque token (the scheduled callback's id), which
/// remove() hands back if the listener goes away first. Thread safe; notify
/// runs under the dispatcher's lock, so after remove() returns it is never
/// called for that listener again.
class async_dispatcher {
public:
    using notify_fn = int (*)(void *arg);
    static constexpr int no_token = -1;
    /// Events a listener's queue holds without growing, and most take()
    /// hands over at once.
    static constexpr size_t batch_len = 64;

    /// Register a listener; returns its id, or -1 when out of memory
    /// (its queue is allocated here, so deliver() does not allocate).
    [[nodiscard]] int add(notify_fn notify, void *arg);
    /// Unregister. Returns the token of a notification not yet taken
    /// (no_token when none): the caller cancels what it scheduled.
    int remove(int id);
    /// Queue 'ev' for every listener (device_fatal also marks the device
    /// lost). A queue beyond batch_len grows, and out of memory the event
    /// is dropped for that listener (counted, logged once; a fatal event
    /// takes the last place instead).
    void deliver(const async_event &ev);
    /// Up to batch_len of the listener's queued events, oldest first, into
    /// 'out'; returns how many. Taking the last clears its notification.
    /// Allocates nothing.
    size_t take(int id, async_event *out);
    /// Events dropped because a queue could not grow.
    uint64_t dropped() const;
    /// Whether a device_fatal event was delivered.
    bool device_lost() const;
    size_t listeners() const;

private:
    struct listener {
        int                      id;
        notify_fn                notify;
        void                    *arg;
        int                      token;   ///< no_token: not notified
        std::vector<async_event> queue;
    };
    listener *find(int id);

    mutable std::mutex    m_lock;
    std::vector<listener> m_listeners;
    int                   m_next_id = 0;
    bool                  m_lost    = false;
    uint64_t              m_dropped = 0;
};

} // namespace zv::verbs

#endif
