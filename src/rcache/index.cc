// SPDX-License-Identifier: BSD-3-Clause
// Sorted map from region start to region, read without locks (see index.h).
#include "rcache/index.h"

#include <algorithm>
#include <new>

namespace zv::rcache {

namespace {

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

} // namespace

region_index::~region_index()
{
    for (leaf *l = m_all_leaves; l != nullptr;) {
        leaf *next = l->next_all;
        delete l;
        l = next;
    }
    directory *d = m_dir.load(std::memory_order_relaxed);
    if (d != nullptr) {
        d->retired = m_retired;
        m_retired  = d;
    }
    for (directory *r = m_retired; r != nullptr;) {
        directory *next = r->retired;
        r->~directory();
        ::operator delete(static_cast<void *>(r));
        r = next;
    }
}

int region_index::candidates(uintptr_t addr, region **out) const noexcept
{
    for (int attempt = 0; attempt < 16; ++attempt) {
        const uint64_t seq = m_seq.load(std::memory_order_acquire);
        if (seq & 1) {
            cpu_relax();
            continue;
        }

        int              n = 0;
        const directory *d = m_dir.load(std::memory_order_acquire);
        if (d != nullptr) {
            const uint32_t nleaf = std::min(d->count.load(std::memory_order_relaxed), d->capacity);
            // Last leaf whose min_key <= addr.
            uint32_t lo = 0, hi = nleaf;
            while (lo < hi) {
                const uint32_t mid = (lo + hi) / 2;
                if (d->min_key[mid].load(std::memory_order_relaxed) <= addr) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            int64_t li = static_cast<int64_t>(lo) - 1;
            if (li >= 0) {
                const leaf *l = d->leaves[li].load(std::memory_order_relaxed);
                int64_t     ei = -1;
                if (l != nullptr) {
                    const uint32_t ne = std::min(l->count.load(std::memory_order_relaxed),
                                                 k_leaf_cap);
                    ei = static_cast<int64_t>(leaf_upper_bound(l, ne, addr)) - 1;
                }
                while ((l != nullptr) && (n < k_walk)) {
                    if (ei < 0) {
                        if (--li < 0) {
                            break;
                        }
                        l = d->leaves[li].load(std::memory_order_relaxed);
                        if (l == nullptr) {
                            break;
                        }
                        ei = static_cast<int64_t>(std::min(l->count.load(std::memory_order_relaxed),
                                                           k_leaf_cap)) - 1;
                        continue;
                    }
                    region *r = l->val[ei--].load(std::memory_order_relaxed);
                    if (r != nullptr) {
                        out[n++] = r;
                    }
                }
            }
        }

        std::atomic_thread_fence(std::memory_order_acquire);
        if (m_seq.load(std::memory_order_relaxed) == seq) {
            return n;
        }
    }
    return -1;
}

uint32_t region_index::leaf_upper_bound(const leaf *l, uint32_t n, uintptr_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (l->key[mid].load(std::memory_order_relaxed) <= key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

void region_index::write_begin()
{
    m_seq.store(m_seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
}

void region_index::write_end()
{
    m_seq.store(m_seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

region_index::leaf *region_index::alloc_leaf()
{
    leaf *l = m_free_leaves;
    if (l != nullptr) {
        m_free_leaves = l->next_free;
        l->count.store(0, std::memory_order_relaxed);
        return l;
    }
    l = new (std::nothrow) leaf();
    if (l != nullptr) {
        l->next_all  = m_all_leaves;
        m_all_leaves = l;
    }
    return l;
}

void region_index::free_leaf(leaf *l)
{
    l->next_free  = m_free_leaves;
    m_free_leaves = l;
}

region_index::directory *region_index::alloc_dir(uint32_t capacity)
{
    const size_t head = (sizeof(directory) + 63) & ~size_t(63);
    const size_t size = head + capacity * (sizeof(std::atomic<uintptr_t>) + sizeof(std::atomic<leaf *>));
    void        *mem  = ::operator new(size, std::nothrow);
    if (mem == nullptr) {
        return nullptr;
    }
    auto *d     = new (mem) directory();
    d->capacity = capacity;
    d->min_key  = reinterpret_cast<std::atomic<uintptr_t> *>(static_cast<char *>(mem) + head);
    d->leaves   = reinterpret_cast<std::atomic<leaf *> *>(d->min_key + capacity);
    for (uint32_t i = 0; i < capacity; ++i) {
        new (&d->min_key[i]) std::atomic<uintptr_t>(0);
        new (&d->leaves[i]) std::atomic<leaf *>(nullptr);
    }
    return d;
}

uint32_t region_index::find_leaf(uintptr_t key) const
{
    const directory *d     = m_dir.load(std::memory_order_relaxed);
    const uint32_t   nleaf = d->count.load(std::memory_order_relaxed);
    uint32_t         lo = 0, hi = nleaf;
    while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (d->min_key[mid].load(std::memory_order_relaxed) <= key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (lo == 0) ? 0 : lo - 1;
}

// Inside a write section.
bool region_index::dir_insert(uint32_t pos, uintptr_t min_key, leaf *l)
{
    directory     *d = m_dir.load(std::memory_order_relaxed);
    const uint32_t n = d->count.load(std::memory_order_relaxed);
    if (n == d->capacity) {
        directory *bigger = alloc_dir(d->capacity * 2);
        if (bigger == nullptr) {
            return false;
        }
        for (uint32_t i = 0; i < n; ++i) {
            bigger->min_key[i].store(d->min_key[i].load(std::memory_order_relaxed),
                                     std::memory_order_relaxed);
            bigger->leaves[i].store(d->leaves[i].load(std::memory_order_relaxed),
                                    std::memory_order_relaxed);
        }
        bigger->count.store(n, std::memory_order_relaxed);
        // Readers may still be searching the old one: keep it until the end.
        d->retired = m_retired;
        m_retired  = d;
        m_dir.store(bigger, std::memory_order_release);
        d = bigger;
    }
    for (uint32_t i = n; i > pos; --i) {
        d->min_key[i].store(d->min_key[i - 1].load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
        d->leaves[i].store(d->leaves[i - 1].load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
    }
    d->min_key[pos].store(min_key, std::memory_order_relaxed);
    d->leaves[pos].store(l, std::memory_order_relaxed);
    d->count.store(n + 1, std::memory_order_relaxed);
    return true;
}

void region_index::dir_erase(uint32_t pos)
{
    directory     *d = m_dir.load(std::memory_order_relaxed);
    const uint32_t n = d->count.load(std::memory_order_relaxed);
    for (uint32_t i = pos; i + 1 < n; ++i) {
        d->min_key[i].store(d->min_key[i + 1].load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
        d->leaves[i].store(d->leaves[i + 1].load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
    }
    d->count.store(n - 1, std::memory_order_relaxed);
}

bool region_index::insert(region *r)
{
    const uintptr_t key = r->start();

    if (m_dir.load(std::memory_order_relaxed) == nullptr) {
        directory *d = alloc_dir(64);
        if (d == nullptr) {
            return false;
        }
        m_dir.store(d, std::memory_order_release);
    }
    directory *d = m_dir.load(std::memory_order_relaxed);

    // Allocate before entering the write section, so that failure leaves
    // the index untouched and readers never wait on an allocation.
    leaf *spare = alloc_leaf();
    if (spare == nullptr) {
        return false;
    }

    write_begin();
    bool ok = true;
    if (d->count.load(std::memory_order_relaxed) == 0) {
        spare->key[0].store(key, std::memory_order_relaxed);
        spare->val[0].store(r, std::memory_order_relaxed);
        spare->count.store(1, std::memory_order_relaxed);
        ok    = dir_insert(0, key, spare);
        spare = ok ? nullptr : spare;
    } else {
        uint32_t li = find_leaf(key);
        leaf    *l  = d->leaves[li].load(std::memory_order_relaxed);
        uint32_t n  = l->count.load(std::memory_order_relaxed);
        if (n == k_leaf_cap) {
            // Split: the upper half moves to the spare leaf, placed after l.
            const uint32_t half = k_leaf_cap / 2;
            for (uint32_t i = half; i < n; ++i) {
                spare->key[i - half].store(l->key[i].load(std::memory_order_relaxed),
                                           std::memory_order_relaxed);
                spare->val[i - half].store(l->val[i].load(std::memory_order_relaxed),
                                           std::memory_order_relaxed);
            }
            spare->count.store(n - half, std::memory_order_relaxed);
            if (dir_insert(li + 1, spare->key[0].load(std::memory_order_relaxed), spare)) {
                l->count.store(half, std::memory_order_relaxed);
                if (key >= spare->key[0].load(std::memory_order_relaxed)) {
                    l  = spare;
                    li = li + 1;
                }
                spare = nullptr;
                d     = m_dir.load(std::memory_order_relaxed);
                n     = l->count.load(std::memory_order_relaxed);
            } else {
                ok = false;
            }
        }
        if (ok) {
            const uint32_t pos = leaf_upper_bound(l, n, key);
            for (uint32_t i = n; i > pos; --i) {
                l->key[i].store(l->key[i - 1].load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
                l->val[i].store(l->val[i - 1].load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
            }
            l->key[pos].store(key, std::memory_order_relaxed);
            l->val[pos].store(r, std::memory_order_relaxed);
            l->count.store(n + 1, std::memory_order_relaxed);
            if (key < d->min_key[li].load(std::memory_order_relaxed)) {
                d->min_key[li].store(key, std::memory_order_relaxed);
            }
        }
    }
    write_end();

    if (spare != nullptr) {
        free_leaf(spare);
    }
    if (ok) {
        ++m_size;
        m_max_len = std::max(m_max_len, r->end() - r->start());
    }
    return ok;
}

void region_index::remove(region *r)
{
    directory *d = m_dir.load(std::memory_order_relaxed);
    if ((d == nullptr) || (m_size == 0)) {
        return;
    }
    const uintptr_t key = r->start();
    const uint32_t  li  = find_leaf(key);
    leaf           *l   = d->leaves[li].load(std::memory_order_relaxed);
    const uint32_t  n   = l->count.load(std::memory_order_relaxed);
    uint32_t        pos = n;
    for (uint32_t i = 0; i < n; ++i) {
        if (l->val[i].load(std::memory_order_relaxed) == r) {
            pos = i;
            break;
        }
    }
    if (pos == n) {
        return;
    }

    write_begin();
    for (uint32_t i = pos; i + 1 < n; ++i) {
        l->key[i].store(l->key[i + 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
        l->val[i].store(l->val[i + 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    l->count.store(n - 1, std::memory_order_relaxed);
    const bool empty = (n == 1);
    if (empty) {
        dir_erase(li);
    }
    write_end();

    if (empty) {
        // Recycled, not freed: a reader may still be looking at it.
        free_leaf(l);
    }
    if (--m_size == 0) {
        m_max_len = 0;
    }
}

} // namespace zv::rcache
