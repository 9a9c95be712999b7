// SPDX-License-Identifier: BSD-3-Clause
// The cache's hit path and release, inline: a lookup and a reference count.
#ifndef ZV_RCACHE_CACHE_INL_H_
#define ZV_RCACHE_CACHE_INL_H_

#include "rcache/cache.h"

namespace zv::rcache {

inline constexpr uintptr_t k_page_size = 4096;

inline bool cache::try_acquire(region *r, uintptr_t addr, uintptr_t end, unsigned access)
{
    uint64_t state = r->m_state.load(std::memory_order_acquire);
    for (;;) {
        if (!(state & region::k_cached)) {
            return false;
        }
        // Read the incarnation's fields after its state; the CAS below fails
        // if the region was retired or recycled since (see region.h).
        if ((r->start() > addr) || (r->end() < end) || ((r->access() & access) != access)) {
            return false;
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (r->m_state.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
            return true;
        }
    }
}

inline ucs_status_t cache::get(void *addr, size_t len, unsigned access, region **out)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);

    if (__builtin_expect(m_odp_access != 0, 0) && ((access & ~m_odp_access) == 0)) {
        return get_odp(a, len, access, out);
    }

    // Pending invalidations (or fork, or cache off): the locked path first.
    const std::atomic<uint64_t> *events = m_events.load(std::memory_order_relaxed);
    if (__builtin_expect(events->load(std::memory_order_acquire) ==
                         m_seen.load(std::memory_order_acquire), 1)) {
        const uintptr_t        end  = a + len;
        std::atomic<region *> &slot = hint_slot(a);
        region                *r    = slot.load(std::memory_order_relaxed);
        if ((r == nullptr) || !try_acquire(r, a, end, access)) {
            region   *cand[region_index::k_walk];
            const int n = m_index.candidates(a, cand);
            r           = nullptr;
            for (int i = 0; i < n; ++i) {
                if (try_acquire(cand[i], a, end, access)) {
                    r = cand[i];
                    slot.store(r, std::memory_order_relaxed);
                    break;
                }
            }
        }
        if (r != nullptr) {
            // Lazy LRU: eviction compares this with the region's list stamp.
            const uint64_t now = m_clock.load(std::memory_order_relaxed);
            if (r->m_last_use.load(std::memory_order_relaxed) != now) {
                r->m_last_use.store(now, std::memory_order_relaxed);
            }
            *out = r;
            return UCS_OK;
        }
    }
    return get_slow(a, len, access, out);
}

inline void cache::put(region *r)
{
    const uint64_t old = r->m_state.fetch_sub(1, std::memory_order_acq_rel);
    // Last reference of a region that is no longer cached (invalidated,
    // evicted, or registered for one use): deregister it.
    if (__builtin_expect((old & (region::k_cached | region::k_refmask)) == 1, 0)) {
        release_slow(r);
    }
}

} // namespace zv::rcache

#endif
