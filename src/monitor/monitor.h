// SPDX-License-Identifier: BSD-3-Clause
// Memory-event sources for the registration cache: interface, factory, module-wide instance.
#ifndef ZV_MONITOR_MONITOR_H_
#define ZV_MONITOR_MONITOR_H_

#include "monitor/event_ring.h"
#include "monitor/kind.h"

#include <ucs/type/status.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace zv::monitor {

// A monitor publishes invalidated address ranges into its event_ring. It is
// shared by every cache of the process (one per memory domain). Methods may
// be called from any thread; none of them is on a cache's hit path.
class monitor {
public:
    virtual ~monitor();
    monitor(const monitor &) = delete;
    monitor &operator=(const monitor &) = delete;

    monitor_kind kind() const { return m_kind; }
    // "uffd", "ucm" or "none".
    const char *name() const { return monitor_kind_name(m_kind); }
    // nullptr for the "none" monitor (no cache).
    event_ring *ring() const { return m_ring; }

    // Starts reporting changes to the page-aligned [start, end), before the
    // memory is registered. UCS_ERR_UNSUPPORTED: this memory cannot be
    // monitored; the cache then registers it for this use only.
    [[nodiscard]] virtual ucs_status_t watch(uintptr_t start, uintptr_t end) = 0;

    // After registration pinned [start, end): may the cache keep it? The uffd
    // monitor keeps only private anonymous memory (see uffd_monitor.cc).
    [[nodiscard]] virtual bool cacheable(uintptr_t start, uintptr_t end) = 0;

    // False once the monitor lost its event source; caches stop caching.
    bool healthy() const { return (m_ring == nullptr) || (m_ring->error() == 0); }

protected:
    explicit monitor(monitor_kind kind) : m_kind(kind) {}

    monitor_kind m_kind;
    event_ring          *m_ring = nullptr;
};

// Creates a monitor of cfg.kind. automatic tries uffd, then ucm, then
// none, and logs the choice at debug level. An explicit uffd or ucm that
// cannot work is an error with a message saying why.
[[nodiscard]] ucs_status_t create(const settings &cfg, monitor **out);
void destroy(monitor *mon);

// The process-wide monitor: created once, by the first zv md opened
// (src/glue/zv_md_glue.cc).
[[nodiscard]] ucs_status_t global_init(const settings &cfg);
void global_cleanup();
monitor *global();
// Name of the active monitor ("uffd", "ucm", "none"); "none" before global_init.
const char *active_name();

// Incremented in every fork child (pthread_atfork). A cache created under
// another value is its parent's: it bypasses itself in the child.
uint64_t fork_generation();

namespace detail {
/// new T, then T::init(cfg, quiet); *out only on success.
template <typename T>
[[nodiscard]] ucs_status_t create_initialized(const settings &cfg, bool quiet,
                                              monitor **out)
{
    auto *mon = new (std::nothrow) T();
    if (mon == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = mon->init(cfg, quiet);
    if (status != UCS_OK) {
        delete mon;
        return status;
    }
    *out = mon;
    return UCS_OK;
}

// Lets the fork handler poke every live ring so that caches notice the fork
// on their next lookup without any extra check on the hit path.
void track_ring(event_ring *ring);
void untrack_ring(event_ring *ring);
ucs_status_t create_uffd(const settings &cfg, bool quiet, monitor **out);
ucs_status_t create_ucm(const settings &cfg, bool quiet, monitor **out);
ucs_status_t create_none(monitor **out);
} // namespace detail

} // namespace zv::monitor

#endif
