// SPDX-License-Identifier: BSD-3-Clause
// The registration cache: (address range, access) -> registration, with limits and invalidation.
#ifndef ZV_RCACHE_CACHE_H_
#define ZV_RCACHE_CACHE_H_

#include "rcache/backend.h"
#include "rcache/config.h"
#include "rcache/index.h"
#include "rcache/region.h"

#include <ucs/type/status.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace zv::monitor {
class monitor;
class event_ring;
} // namespace zv::monitor

namespace zv::rcache {

struct cache_stats {
    uint64_t misses        = 0; // get() calls that took the locked path
    uint64_t registrations = 0; // backend reg() calls that succeeded
    uint64_t deregistrations = 0;
    uint64_t evictions     = 0; // idle regions dropped for the limits
    uint64_t invalidations = 0; // regions dropped because their memory changed
    uint64_t flushes       = 0; // "drop everything" (lost events, fork, monitor failure)
    uint64_t reg_retries   = 0; // registrations retried after evicting idle regions
    uint64_t uncached      = 0; // registrations made for one use only
    uint64_t cached_regions = 0;
    uint64_t cached_bytes  = 0;
    uint64_t max_regions   = 0;
    uint64_t max_size      = 0;
};

// Thread safety: get() and put() from any number of threads. A hit takes no
// lock, makes no system call and no virtual call, and writes only to the
// region it returns. Everything else (miss, invalidation, eviction, release
// of a region no longer cached) runs under one mutex on the calling thread;
// the monitor never takes it.
//
// Fork: a child never uses the parent's registrations. The fork handler
// pokes the event ring, the child's next get() sees a new fork generation and
// the cache bypasses itself from then on (each get() registers for one use).
// Regions registered by the parent are never deregistered by the child: the
// verbs context is the parent's.
//
// Before a fork() (a pthread_atfork prepare handler, as UCX's
// RCACHE_PURGE_ON_FORK) every live cache deregisters its idle regions: a
// page the application deregistered must be in the child like any other
// page, and libibverbs marks registered pages MADV_DONTFORK once
// ibv_fork_init() ran (UCX's ib md calls it by default), which takes them out
// of the child. Regions held at the fork stay registered (and absent in the
// child). posix_spawn() - what glibc's system() and popen() use - runs no
// fork handlers and costs the cache nothing.
class cache {
public:
    // mon may be nullptr or the "none" monitor: no caching at all. be and mon
    // must outlive the cache. name is for logs.
    [[nodiscard]] static ucs_status_t create(const config &cfg, backend *be,
                                             monitor::monitor *mon, const char *name,
                                             cache **out);
    // Deregisters everything idle. Regions still held are reported and leaked.
    static void destroy(cache *c);
    // Regions callers hold (got and not yet put); 0 means destroy() leaks
    // nothing. Takes the cache lock: not for hot paths.
    size_t in_use();

    // Returns a region covering [addr, addr + len) registered with at least
    // access, holding one reference for the caller. Errors: the backend's
    // (for memory that cannot be registered), UCS_ERR_NO_MEMORY.
    [[nodiscard]] inline ucs_status_t get(void *addr, size_t len, unsigned access, region **out);
    // Drops the reference taken by get(). A region that was invalidated or
    // evicted while held is deregistered here when its last holder puts it.
    inline void put(region *r);

    // Drops every idle region (and retires busy ones).
    void flush();
    // Deregisters every idle region, keeps the ones held (the fork
    // handler's work; callable by anyone). Returns how many went.
    size_t purge_idle();
    cache_stats stats();
    // Which path serves this cache: "uffd", "ucm", "none", "fork-bypass".
    const char *mode_name();

    cache(const cache &) = delete;
    cache &operator=(const cache &) = delete;

private:
    enum region_kind : uint8_t { k_kind_cached = 0, k_kind_private = 1, k_kind_odp_implicit = 2 };

    cache() = default;
    ~cache();

    ucs_status_t get_slow(uintptr_t addr, size_t len, unsigned access, region **out);
    void         release_slow(region *r);
    ucs_status_t get_private(uintptr_t start, uintptr_t end, unsigned access, bool odp,
                             region **out);
    ucs_status_t get_odp(uintptr_t addr, size_t len, unsigned access, region **out);
    static bool  try_acquire(region *r, uintptr_t addr, uintptr_t end, unsigned access);
    std::atomic<region *> &hint_slot(uintptr_t addr) const
    {
        return m_hint[((addr >> 12) * 0x9E3779B97F4A7C15ull) >> m_hint_shift];
    }

    // Under m_lock.
    void     drain_events();
    void     enter_bypass(const char *why);
    void     invalidate_range(uintptr_t start, uintptr_t end);
    void     invalidate_all();
    template <class Pred> void retire_matching(uintptr_t start, uintptr_t end, Pred &&pred,
                                               bool evicted);
    void     retire(region *r, bool evicted);
    void     teardown(region *r);
    bool     make_room(size_t bytes);
    // Retires every idle cached region; returns how many.
    size_t   evict_idle();
    // Pooled regions with references (under m_lock).
    size_t   held_pooled() const;
    region  *alloc_region();
    void     lru_push_head(region *r);
    void     lru_remove(region *r);

    // --- read by every lookup ---
    // Points at the monitor ring's begin counter, or at m_never when the
    // cache is off, so that "is anything pending" is one comparison.
    alignas(64) std::atomic<const std::atomic<uint64_t> *> m_events{nullptr};
    std::atomic<uint64_t> m_seen{0};
    std::atomic<uint64_t> m_clock{1};
    unsigned              m_odp_access = 0;
    // Lookaside table: page of the last lookups -> region that served them.
    // A hint is only a candidate: try_acquire() validates it like any index
    // result, so a stale or recycled entry costs a miss, never a wrong hit.
    // It saves the index's binary searches (and their mispredictions) on
    // repeated hits; written only when the index had to be searched.
    std::atomic<region *> *m_hint       = nullptr;
    unsigned               m_hint_shift = 64;
    region_index          m_index;

    // --- slow path ---
    alignas(64) std::mutex m_lock;
    std::atomic<uint64_t>  m_never{1}; // never equal to m_seen (0)
    backend               *m_backend = nullptr;
    monitor::monitor      *m_monitor = nullptr;
    monitor::event_ring   *m_ring    = nullptr;
    uint64_t               m_cursor_next     = 0;
    uint64_t               m_cursor_overflow = 0;
    uint64_t               m_fork_gen        = 0;
    const char            *m_mode            = "none";
    char                   m_name[32]        = {};
    limits                 m_limits{};
    region                *m_lru_head  = nullptr; // most recent
    region                *m_lru_tail  = nullptr;
    region                *m_free      = nullptr;
    struct chunk {
        chunk  *next;
        region *regions;
    };
    chunk                 *m_chunks    = nullptr;
    // The implicit on-demand registration, created on first use; the cache
    // holds one reference on it forever.
    std::atomic<region *>  m_odp_region{nullptr};
    bool                   m_odp_implicit = false;
    cache_stats            m_stats{};
    std::atomic<uint64_t>  m_uncached{0};
    std::atomic<uint64_t>  m_private_regs{0};
    std::atomic<uint64_t>  m_private_deregs{0};
};

} // namespace zv::rcache

#include "rcache/cache_inl.h"

#endif
