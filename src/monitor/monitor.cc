// SPDX-License-Identifier: BSD-3-Clause
// Monitor factory, module-wide instance and the fork hook shared by all monitors.
#include "monitor/monitor.h"

#include "util/log.h"

#include <pthread.h>

#include <mutex>
#include <new>

namespace zv::monitor {

namespace {

constexpr int k_max_rings = 64;

std::atomic<event_ring *> g_rings[k_max_rings];
std::atomic<uint64_t>     g_fork_generation{0};
std::once_flag            g_atfork_once;
monitor                  *g_monitor = nullptr;

// Runs in the child only, single-threaded, possibly while another (now gone)
// thread held any lock: touch atomics only.
void on_fork_child()
{
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
    for (auto &slot : g_rings) {
        event_ring *ring = slot.load(std::memory_order_relaxed);
        if (ring != nullptr) {
            ring->poke();
        }
    }
}

class none_monitor final : public monitor {
public:
    none_monitor() : monitor(monitor_kind::none) {}
    ucs_status_t watch(uintptr_t, uintptr_t) override { return UCS_ERR_UNSUPPORTED; }
    bool cacheable(uintptr_t, uintptr_t) override { return false; }
};

} // namespace

monitor::~monitor() = default;

namespace detail {

void track_ring(event_ring *ring)
{
    std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
    for (auto &slot : g_rings) {
        event_ring *expected = nullptr;
        if (slot.compare_exchange_strong(expected, ring)) {
            return;
        }
    }
    // More than k_max_rings monitors alive at once only happens in tests;
    // the cache still notices a fork through fork_generation() on its slow path.
    zv_log_debug("more than %d monitors: fork notification by slow path only", k_max_rings);
}

void untrack_ring(event_ring *ring)
{
    for (auto &slot : g_rings) {
        event_ring *expected = ring;
        if (slot.compare_exchange_strong(expected, nullptr)) {
            return;
        }
    }
}

ucs_status_t create_none(monitor **out)
{
    auto *mon = new (std::nothrow) none_monitor();
    if (mon == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    *out = mon;
    return UCS_OK;
}

} // namespace detail

uint64_t fork_generation() { return g_fork_generation.load(std::memory_order_acquire); }

ucs_status_t create(const settings &cfg, monitor **out)
{
    switch (cfg.kind) {
    case monitor_kind::none:
        return detail::create_none(out);
    case monitor_kind::uffd:
        return detail::create_uffd(cfg, false, out);
    case monitor_kind::ucm:
        return detail::create_ucm(cfg, false, out);
    case monitor_kind::automatic:
        break;
    }

    if (detail::create_uffd(cfg, true, out) == UCS_OK) {
        zv_log_debug("zv rcache monitor: auto selected uffd (kernel notifier)");
        return UCS_OK;
    }
    if (detail::create_ucm(cfg, true, out) == UCS_OK) {
        zv_log_debug("zv rcache monitor: auto selected ucm (userfaultfd not usable)");
        return UCS_OK;
    }
    zv_log_debug("zv rcache monitor: auto selected none (neither userfaultfd nor UCM "
                 "events usable): registration cache disabled");
    return detail::create_none(out);
}

void destroy(monitor *mon) { delete mon; }

ucs_status_t global_init(const settings &cfg)
{
    if (g_monitor != nullptr) {
        return UCS_OK;
    }
    monitor     *mon    = nullptr;
    ucs_status_t status = create(cfg, &mon);
    if (status != UCS_OK) {
        return status;
    }
    g_monitor = mon;
    zv_log_debug("zv rcache monitor: %s", mon->name());
    return UCS_OK;
}

void global_cleanup()
{
    destroy(g_monitor);
    g_monitor = nullptr;
}

monitor *global() { return g_monitor; }

const char *active_name() { return (g_monitor != nullptr) ? g_monitor->name() : "none"; }

} // namespace zv::monitor
