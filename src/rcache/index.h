// SPDX-License-Identifier: BSD-3-Clause
// Sorted map from region start to region, read without locks under a sequence counter.
#ifndef ZV_RCACHE_INDEX_H_
#define ZV_RCACHE_INDEX_H_

#include "rcache/region.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zv::rcache {

// A two-level sorted array (a directory of leaves of up to 64 keys, like a
// B+tree of height two), keyed by region start, unique keys. Regions may
// overlap (see cache.cc for the overlap policy); m_max_len bounds how far
// before a range a region overlapping it can start.
//
// Readers take no lock and write nothing shared: they read m_seq, search,
// and re-read m_seq (a seqlock); a concurrent writer makes them retry, a few
// times, then give up (the caller takes its locked slow path). Everything a
// reader touches is an atomic read with relaxed order, leaves are recycled but
// never freed, and an outgrown directory is kept until destruction, so a
// reader racing a writer sees stale but mapped memory and is told to retry.
// Every bound a reader uses is clamped, so torn values cannot send it astray.
//
// Writers: one at a time, under the cache lock.
class region_index {
public:
    static constexpr unsigned k_leaf_cap = 64;
    // Candidates a lookup examines: the region starting at or before the
    // address and up to three before it (overlapping ones).
    static constexpr int k_walk = 4;

    region_index() = default;
    ~region_index();
    region_index(const region_index &) = delete;
    region_index &operator=(const region_index &) = delete;

    // Lock-free. Fills out[] with up to k_walk regions whose start <= addr,
    // nearest first. Returns their number, or -1 when no consistent snapshot
    // could be read because writers kept changing the index.
    int candidates(uintptr_t addr, region **out) const noexcept;

    // --- writer side, under the cache lock ---
    [[nodiscard]] bool insert(region *r);
    void remove(region *r);
    size_t size() const { return m_size; }

    // Calls fn(region *) for each region intersecting [start, end) until fn
    // returns false. fn must not modify the index.
    template <class Fn> void for_each_overlapping(uintptr_t start, uintptr_t end, Fn &&fn) const;
    template <class Fn> void for_each(Fn &&fn) const;

private:
    struct leaf {
        std::atomic<uint32_t>  count{0};
        std::atomic<uintptr_t> key[k_leaf_cap];
        std::atomic<region *>  val[k_leaf_cap];
        leaf                  *next_free = nullptr;
        leaf                  *next_all  = nullptr;
    };

    struct directory {
        uint32_t                capacity = 0;
        std::atomic<uint32_t>   count{0};
        std::atomic<uintptr_t> *min_key  = nullptr;
        std::atomic<leaf *>    *leaves   = nullptr;
        directory              *retired  = nullptr;
    };

    void      write_begin();
    void      write_end();
    leaf     *alloc_leaf();
    void      free_leaf(leaf *l);
    directory *alloc_dir(uint32_t capacity);
    bool      dir_insert(uint32_t pos, uintptr_t min_key, leaf *l);
    void      dir_erase(uint32_t pos);
    // Index of the last leaf whose min_key <= key, or 0.
    uint32_t  find_leaf(uintptr_t key) const;
    static uint32_t leaf_upper_bound(const leaf *l, uint32_t n, uintptr_t key);

    alignas(64) std::atomic<uint64_t> m_seq{0};
    std::atomic<directory *>          m_dir{nullptr};
    alignas(64) leaf                 *m_free_leaves = nullptr;
    leaf                             *m_all_leaves  = nullptr;
    directory                        *m_retired     = nullptr;
    size_t                            m_size        = 0;
    uintptr_t                         m_max_len     = 0;
};

template <class Fn>
void region_index::for_each_overlapping(uintptr_t start, uintptr_t end, Fn &&fn) const
{
    directory *d = m_dir.load(std::memory_order_relaxed);
    if ((d == nullptr) || (m_size == 0)) {
        return;
    }
    const uintptr_t from  = (start > m_max_len) ? (start - m_max_len) : 0;
    const uint32_t  nleaf = d->count.load(std::memory_order_relaxed);
    for (uint32_t li = find_leaf(from); li < nleaf; ++li) {
        const leaf    *l = d->leaves[li].load(std::memory_order_relaxed);
        const uint32_t n = l->count.load(std::memory_order_relaxed);
        for (uint32_t i = 0; i < n; ++i) {
            const uintptr_t key = l->key[i].load(std::memory_order_relaxed);
            if (key >= end) {
                return;
            }
            region *r = l->val[i].load(std::memory_order_relaxed);
            if ((key >= from) && (r->end() > start) && !fn(r)) {
                return;
            }
        }
    }
}

template <class Fn> void region_index::for_each(Fn &&fn) const
{
    directory *d = m_dir.load(std::memory_order_relaxed);
    if (d == nullptr) {
        return;
    }
    const uint32_t nleaf = d->count.load(std::memory_order_relaxed);
    for (uint32_t li = 0; li < nleaf; ++li) {
        const leaf    *l = d->leaves[li].load(std::memory_order_relaxed);
        const uint32_t n = l->count.load(std::memory_order_relaxed);
        for (uint32_t i = 0; i < n; ++i) {
            if (!fn(l->val[i].load(std::memory_order_relaxed))) {
                return;
            }
        }
    }
}

} // namespace zv::rcache

#endif
