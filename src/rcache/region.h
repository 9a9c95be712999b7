// SPDX-License-Identifier: BSD-3-Clause
// One registered address range: what a get() hands out and put() gives back.
#ifndef ZV_RCACHE_REGION_H_
#define ZV_RCACHE_REGION_H_

#include "rcache/backend.h"

#include <atomic>
#include <cstdint>

namespace zv::rcache {

class cache;

// Regions come from the cache's pool and are reused, never freed while the
// cache lives, so a lookup racing with a removal reads a valid (if stale)
// object and fails its compare-and-swap instead of touching freed memory.
//
// m_state packs the incarnation, the "hittable" flag and the reference count,
// so that taking a reference and checking that the region is still cached and
// still the same incarnation is a single compare-and-swap:
//   bits 63..32  version   incremented whenever the region is recycled
//   bit  31      cached    in the index and valid: lookups may take it
//   bits 30..0   refcount  references held by callers
class region {
public:
    static constexpr uint64_t k_cached   = 1ULL << 31;
    static constexpr uint64_t k_refmask  = k_cached - 1;
    static constexpr uint64_t k_version1 = 1ULL << 32;

    // First byte / one past the last byte covered (page-aligned).
    uintptr_t start() const { return m_start.load(std::memory_order_relaxed); }
    uintptr_t end() const { return m_end.load(std::memory_order_relaxed); }
    unsigned access() const { return m_access.load(std::memory_order_relaxed); }
    // Valid while the caller holds its reference.
    const reg_handle &handle() const { return m_handle; }
    uint32_t lkey() const { return m_handle.lkey; }
    uint32_t rkey() const { return m_handle.rkey; }
    void *obj() const { return m_handle.obj; }

private:
    friend class cache;
    friend class region_index;

    std::atomic<uint64_t>  m_state{0};
    std::atomic<uintptr_t> m_start{0};
    std::atomic<uintptr_t> m_end{0};
    std::atomic<unsigned>  m_access{0};
    // Cache clock at the last hit; read by eviction (lazy LRU).
    std::atomic<uint64_t>  m_last_use{0};
    reg_handle             m_handle;

    // Owned by the cache lock.
    region  *m_lru_prev = nullptr;
    region  *m_lru_next = nullptr;
    region  *m_free_next = nullptr;
    uint64_t m_lru_stamp = 0;
    uint64_t m_fork_gen  = 0;   // fork generation that registered it
    uint8_t  m_kind      = 0;   // cache::region_kind
    bool     m_in_lru    = false;
};

} // namespace zv::rcache

#endif
