// SPDX-License-Identifier: BSD-3-Clause
// The registration cache's slow paths: miss, invalidation, eviction, release, fork.
//
// Overlap policy: separate regions, with subsumption. A request that no
// cached region covers (with the access it needs) becomes a new region of its
// own page range. Cached regions it fully contains are retired into it (it
// takes their access bits too), and a cached region that covers it but lacks
// access bits is replaced by one of the same range with the union of access.
// Regions that only partly overlap it, and adjacent ones, stay as they are.
// Merging neighbours (as ucs_rcache does) makes each registration re-pin
// everything around it: a buffer registered in pipeline fragments whose
// page-rounded ends overlap would be re-registered whole for every fragment,
// a cost quadratic in the buffer size. With this policy each page is pinned
// by at most the regions that were actually asked for, and start addresses
// stay unique, which the index needs.
#include "rcache/cache.h"

#include "monitor/monitor.h"
#include "util/log.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include <pthread.h>

namespace zv::rcache {

namespace {

constexpr size_t k_chunk_regions = 256;
constexpr int    k_batch         = 64;

uintptr_t page_down(uintptr_t a) { return a & ~(k_page_size - 1); }
uintptr_t page_up(uintptr_t a) { return (a + k_page_size - 1) & ~(k_page_size - 1); }

} // namespace

namespace {

// Every live cache, for the fork handler: slots, not a list through the
// caches, and nothing here of external linkage, so that a process holding
// two copies of this code (the module, and a test program linked with the
// core too) has two consistent sets, each with its own handler. Lock order:
// this lock, then a cache's m_lock (destroy() leaves before it takes it).
constexpr int k_max_live = 256;
cache        *g_live[k_max_live];

std::mutex &live_lock()
{
    // Never destroyed (fork may come during exit), and built in place: a
    // cache's creation allocates nothing it cannot report.
    alignas(std::mutex) static unsigned char storage[sizeof(std::mutex)];
    static std::mutex *m = new (storage) std::mutex();
    return *m;
}

// pthread_atfork prepare: runs in the forking thread before fork().
void before_fork()
{
    std::lock_guard<std::mutex> guard(live_lock());
    for (cache *c : g_live) {
        if (c != nullptr) {
            (void)c->purge_idle();
        }
    }
}

void live_add(cache *c)
{
    static std::once_flag once;
    std::call_once(once, [] {
        const int ret = pthread_atfork(before_fork, nullptr, nullptr);
        if (ret != 0) {
            zv_log_warn("zv rcache: pthread_atfork() failed: %s: a fork child may miss "
                        "pages deregistered before the fork", strerror(ret));
        }
    });
    std::lock_guard<std::mutex> guard(live_lock());
    for (cache *&slot : g_live) {
        if (slot == nullptr) {
            slot = c;
            return;
        }
    }
    // More live caches than slots only happens in tests.
    zv_log_debug("zv rcache: more than %d caches: not purged before a fork", k_max_live);
}

void live_remove(cache *c)
{
    std::lock_guard<std::mutex> guard(live_lock());
    for (cache *&slot : g_live) {
        if (slot == c) {
            slot = nullptr;
        }
    }
}

} // namespace

ucs_status_t cache::create(const config &cfg, backend *be, monitor::monitor *mon,
                           const char *name, cache **out)
{
    auto *c = new (std::nothrow) cache();
    if (c == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    snprintf(c->m_name, sizeof(c->m_name), "%s", (name != nullptr) ? name : "zv");
    c->m_backend      = be;
    c->m_monitor      = mon;
    c->m_limits       = resolve_limits(cfg, be->max_regions_hint());
    c->m_fork_gen     = monitor::fork_generation();
    c->m_odp_access   = cfg.odp ? be->odp_access() : 0;
    c->m_odp_implicit = be->odp_implicit();
    c->m_events.store(&c->m_never, std::memory_order_relaxed);

    // Two slots per cacheable region, a power of two between 1K and 256K.
    size_t slots = 1024;
    unsigned bits = 10;
    while ((slots < 2 * c->m_limits.max_regions) && (bits < 18)) {
        slots <<= 1;
        ++bits;
    }
    c->m_hint = new (std::nothrow) std::atomic<region *>[slots];
    if (c->m_hint == nullptr) {
        delete c;
        return UCS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < slots; ++i) {
        c->m_hint[i].store(nullptr, std::memory_order_relaxed);
    }
    c->m_hint_shift = 64 - bits;

    if ((mon != nullptr) && (mon->ring() != nullptr) && mon->healthy()) {
        c->m_ring = mon->ring();
        // Empty so far: start at the ring's current end.
        const uint64_t seen       = c->m_ring->wait_quiescent();
        const auto     cur        = c->m_ring->make_cursor();
        c->m_cursor_next          = cur.next;
        c->m_cursor_overflow      = cur.overflow_seen;
        c->m_seen.store(seen, std::memory_order_relaxed);
        c->m_events.store(&c->m_ring->begins(), std::memory_order_release);
        c->m_mode = mon->name();
    }
    live_add(c);
    zv_log_debug("zv rcache %s: monitor %s, max_size %zu, max_regions %zu, odp access 0x%x%s",
                 c->m_name, c->m_mode, c->m_limits.max_size, c->m_limits.max_regions,
                 c->m_odp_access, c->m_odp_implicit ? " (implicit)" : "");
    *out = c;
    return UCS_OK;
}

void cache::destroy(cache *c)
{
    live_remove(c); // (before ~cache takes m_lock: the lock order)
    delete c;
}

cache::~cache()
{
    std::lock_guard<std::mutex> guard(m_lock);
    delete[] m_hint;
    const bool forked = (m_fork_gen != monitor::fork_generation());

    size_t busy = 0;
    if (!forked) {
        retire_matching(0, UINTPTR_MAX, [](region *) { return true; }, false);
    } else {
        // The parent's registrations: neither used nor deregistered here.
        m_index.for_each([&busy](region *r) {
            busy += ((r->m_state.load(std::memory_order_relaxed) & region::k_refmask) != 0);
            return true;
        });
    }
    if (!forked) {
        busy += held_pooled();
    }

    region *odp = m_odp_region.load(std::memory_order_relaxed);
    if (odp != nullptr) {
        if (!forked) {
            m_backend->dereg(odp->m_handle);
        }
        delete odp;
    }

    if (busy != 0) {
        // Regions still held would point into freed memory: leak them.
        zv_log_warn("zv rcache %s: destroyed with %zu regions still in use", m_name, busy);
        return;
    }
    for (chunk *ch = m_chunks; ch != nullptr;) {
        chunk *next = ch->next;
        delete[] ch->regions;
        delete ch;
        ch = next;
    }
}

size_t cache::held_pooled() const
{
    size_t busy = 0;
    for (const chunk *ch = m_chunks; ch != nullptr; ch = ch->next) {
        for (size_t i = 0; i < k_chunk_regions; ++i) {
            busy += (ch->regions[i].m_state.load(std::memory_order_relaxed) &
                     region::k_refmask) != 0;
        }
    }
    return busy;
}

size_t cache::in_use()
{
    std::lock_guard<std::mutex> guard(m_lock);
    size_t busy = held_pooled();
    busy += m_private_regs.load(std::memory_order_relaxed) -
            m_private_deregs.load(std::memory_order_relaxed);
    const region *odp = m_odp_region.load(std::memory_order_relaxed);
    if (odp != nullptr) {
        // The cache's own reference is not a caller's.
        busy += (odp->m_state.load(std::memory_order_relaxed) & region::k_refmask) - 1;
    }
    return busy;
}

region *cache::alloc_region()
{
    if (m_free == nullptr) {
        auto *ch = new (std::nothrow) chunk();
        if (ch == nullptr) {
            return nullptr;
        }
        ch->regions = new (std::nothrow) region[k_chunk_regions];
        if (ch->regions == nullptr) {
            delete ch;
            return nullptr;
        }
        ch->next = m_chunks;
        m_chunks = ch;
        for (size_t i = 0; i < k_chunk_regions; ++i) {
            ch->regions[i].m_state.store(region::k_version1, std::memory_order_relaxed);
            ch->regions[i].m_free_next = m_free;
            m_free                     = &ch->regions[i];
        }
    }
    region *r   = m_free;
    m_free      = r->m_free_next;
    r->m_kind   = k_kind_cached;
    r->m_in_lru = false;
    return r;
}

void cache::lru_push_head(region *r)
{
    r->m_lru_prev = nullptr;
    r->m_lru_next = m_lru_head;
    if (m_lru_head != nullptr) {
        m_lru_head->m_lru_prev = r;
    } else {
        m_lru_tail = r;
    }
    m_lru_head  = r;
    r->m_in_lru = true;
}

void cache::lru_remove(region *r)
{
    if (!r->m_in_lru) {
        return;
    }
    (r->m_lru_prev ? r->m_lru_prev->m_lru_next : m_lru_head) = r->m_lru_next;
    (r->m_lru_next ? r->m_lru_next->m_lru_prev : m_lru_tail) = r->m_lru_prev;
    r->m_in_lru = false;
}

// Takes r out of the index: no lookup can return it any more. Whoever holds
// it keeps a valid registration; the last put() deregisters it.
void cache::retire(region *r, bool evicted)
{
    m_index.remove(r);
    lru_remove(r);
    --m_stats.cached_regions;
    m_stats.cached_bytes -= r->end() - r->start();
    ++(evicted ? m_stats.evictions : m_stats.invalidations);

    const uint64_t old = r->m_state.fetch_and(~region::k_cached, std::memory_order_acq_rel);
    if ((old & region::k_refmask) == 0) {
        teardown(r);
    }
}

template <class Pred>
void cache::retire_matching(uintptr_t start, uintptr_t end, Pred &&pred, bool evicted)
{
    // Retiring changes the index, so collect in batches and search again.
    region *batch[k_batch];
    for (;;) {
        int n = 0;
        m_index.for_each_overlapping(start, end, [&](region *r) {
            if (pred(r)) {
                batch[n++] = r;
            }
            return n < k_batch;
        });
        for (int i = 0; i < n; ++i) {
            retire(batch[i], evicted);
        }
        if (n < k_batch) {
            return;
        }
    }
}

void cache::teardown(region *r)
{
    if (r->m_fork_gen == monitor::fork_generation()) {
        m_backend->dereg(r->m_handle);
        ++m_stats.deregistrations;
    }
    // New incarnation before the fields can change (see region.h).
    const uint64_t version = r->m_state.load(std::memory_order_relaxed) >> 32;
    r->m_state.store((version + 1) << 32, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    r->m_free_next = m_free;
    m_free         = r;
}

void cache::release_slow(region *r)
{
    if (r->m_kind == k_kind_private) {
        if (r->m_fork_gen == monitor::fork_generation()) {
            m_backend->dereg(r->m_handle);
            m_private_deregs.fetch_add(1, std::memory_order_relaxed);
        }
        delete r;
        return;
    }
    std::lock_guard<std::mutex> guard(m_lock);
    teardown(r);
}

void cache::invalidate_range(uintptr_t start, uintptr_t end)
{
    start = page_down(start);
    end   = (end > start) ? page_up(end) : start + k_page_size;
    retire_matching(start, end, [](region *) { return true; }, false);
}

void cache::invalidate_all()
{
    retire_matching(0, UINTPTR_MAX, [](region *) { return true; }, false);
    ++m_stats.flushes;
}

void cache::drain_events()
{
    bool           stuck = false;
    const uint64_t seen  = m_ring->wait_quiescent(5000, &stuck);
    if (stuck) {
        zv_log_error("zv rcache %s: %s monitor stuck inside an event batch for 5 s: cache "
                     "disabled", m_name, m_monitor->name());
        invalidate_all();
        enter_bypass("none");
        return;
    }
    monitor::event_ring::cursor cur;
    cur.next          = m_cursor_next;
    cur.overflow_seen = m_cursor_overflow;
    const bool intact = m_ring->drain(cur, [this](uintptr_t s, uintptr_t e) {
        if ((s == 0) && (e == UINTPTR_MAX)) {
            invalidate_all();
        } else {
            invalidate_range(s, e);
        }
    });
    m_cursor_next     = cur.next;
    m_cursor_overflow = cur.overflow_seen;
    if (!intact) {
        zv_log_debug("zv rcache %s: invalidation queue overflowed, dropping all regions", m_name);
        invalidate_all();
    }
    // After the retirements: a lookup that reads this value sees them.
    m_seen.store(seen, std::memory_order_release);
}

void cache::enter_bypass(const char *why)
{
    m_events.store(&m_never, std::memory_order_release);
    m_seen.store(0, std::memory_order_release);
    m_mode = why;
}

// Evicts idle regions, least recently used first, until one more region of
// `bytes` fits. The list is ordered by insertion or last eviction pass; hits
// only stamp m_last_use, so a region hit since it was stamped gets a second
// chance at the head instead of being evicted (LRU at the granularity of the
// cache clock, which advances on every slow-path operation).
bool cache::make_room(size_t bytes)
{
    if (bytes > m_limits.max_size) {
        return false;
    }
    size_t budget = 2 * m_stats.cached_regions + 2;
    while (((m_stats.cached_regions + 1 > m_limits.max_regions) ||
            (m_stats.cached_bytes + bytes > m_limits.max_size)) &&
           (m_lru_tail != nullptr) && (budget-- > 0)) {
        region        *r     = m_lru_tail;
        const uint64_t used  = r->m_last_use.load(std::memory_order_relaxed);
        uint64_t       state = r->m_state.load(std::memory_order_acquire);
        if (((state & region::k_refmask) != 0) || (used > r->m_lru_stamp)) {
            lru_remove(r);
            r->m_lru_stamp = m_clock.load(std::memory_order_relaxed);
            lru_push_head(r);
            continue;
        }
        // Idle. A lookup racing with this still gets a valid registration:
        // retire() leaves busy regions to their last put().
        retire(r, true);
    }
    return (m_stats.cached_regions + 1 <= m_limits.max_regions) &&
           (m_stats.cached_bytes + bytes <= m_limits.max_size);
}

size_t cache::evict_idle()
{
    size_t n = 0;
    for (region *r = m_lru_tail; r != nullptr;) {
        region *prev = r->m_lru_prev;
        if ((r->m_state.load(std::memory_order_acquire) & region::k_refmask) == 0) {
            retire(r, true);
            ++n;
        }
        r = prev;
    }
    return n;
}

ucs_status_t cache::get_private(uintptr_t start, uintptr_t end, unsigned access, bool odp,
                                region **out)
{
    auto *r = new (std::nothrow) region();
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = m_backend->reg(reinterpret_cast<void *>(start), end - start, access,
                                         odp, &r->m_handle);
    if (status != UCS_OK) {
        delete r;
        return status;
    }
    r->m_start.store(start, std::memory_order_relaxed);
    r->m_end.store(end, std::memory_order_relaxed);
    r->m_access.store(access, std::memory_order_relaxed);
    r->m_kind     = k_kind_private;
    r->m_fork_gen = monitor::fork_generation();
    r->m_state.store(region::k_version1 | 1, std::memory_order_release);
    m_uncached.fetch_add(1, std::memory_order_relaxed);
    m_private_regs.fetch_add(1, std::memory_order_relaxed);
    *out = r;
    return UCS_OK;
}

ucs_status_t cache::get_odp(uintptr_t addr, size_t len, unsigned access, region **out)
{
    const uintptr_t start = page_down(addr);
    const uintptr_t end   = std::max(page_up(addr + len), start + k_page_size);
    if (!m_odp_implicit) {
        return get_private(start, end, access, true, out);
    }

    region *odp = m_odp_region.load(std::memory_order_acquire);
    if (odp == nullptr) {
        std::lock_guard<std::mutex> guard(m_lock);
        odp = m_odp_region.load(std::memory_order_relaxed);
        if (odp == nullptr) {
            odp = new (std::nothrow) region();
            if (odp == nullptr) {
                return UCS_ERR_NO_MEMORY;
            }
            const ucs_status_t status = m_backend->reg(nullptr, SIZE_MAX, m_odp_access, true,
                                                       &odp->m_handle);
            if (status != UCS_OK) {
                delete odp;
                zv_log_debug("zv rcache %s: implicit ODP registration failed: %s, using "
                             "explicit ODP", m_name, ucs_status_string(status));
                m_odp_implicit = false;
                return get_private(start, end, access, true, out);
            }
            odp->m_start.store(0, std::memory_order_relaxed);
            odp->m_end.store(UINTPTR_MAX, std::memory_order_relaxed);
            odp->m_access.store(m_odp_access, std::memory_order_relaxed);
            odp->m_kind     = k_kind_odp_implicit;
            odp->m_fork_gen = monitor::fork_generation();
            // The cache's own reference keeps it from ever being released.
            odp->m_state.store(region::k_version1 | 1, std::memory_order_relaxed);
            m_odp_region.store(odp, std::memory_order_release);
        }
    }
    odp->m_state.fetch_add(1, std::memory_order_acq_rel);
    *out = odp;
    return UCS_OK;
}

ucs_status_t cache::get_slow(uintptr_t addr, size_t len, unsigned access, region **out)
{
    const uintptr_t start = page_down(addr);
    const uintptr_t end   = std::max(page_up(addr + len), start + k_page_size);

    std::unique_lock<std::mutex> lock(m_lock);

    if (m_events.load(std::memory_order_relaxed) != &m_never) {
        if (m_fork_gen != monitor::fork_generation()) {
            zv_log_debug("zv rcache %s: fork child: bypassing the parent's cache", m_name);
            enter_bypass("fork-bypass");
        } else if (!m_monitor->healthy()) {
            zv_log_error("zv rcache %s: %s monitor stopped (%s): cache disabled", m_name,
                         m_monitor->name(), strerror(m_ring->error()));
            invalidate_all();
            enter_bypass("none");
        }
    }
    if (m_events.load(std::memory_order_relaxed) == &m_never) {
        lock.unlock();
        return get_private(start, end, access, false, out);
    }

    drain_events();
    if (m_events.load(std::memory_order_relaxed) == &m_never) {
        lock.unlock();
        return get_private(start, end, access, false, out);
    }
    ++m_stats.misses;
    m_clock.fetch_add(1, std::memory_order_relaxed);
    const uint64_t now = m_clock.load(std::memory_order_relaxed);

    // An exhaustive search: the lock-free one looks at a few candidates only.
    region *hit   = nullptr;
    region *cover = nullptr;
    m_index.for_each_overlapping(start, end, [&](region *r) {
        if (try_acquire(r, addr, addr + len, access)) {
            hit = r;
            return false;
        }
        if ((r->start() <= start) && (r->end() >= end)) {
            cover = r; // covers the range but lacks access bits
        }
        return true;
    });
    if (hit != nullptr) {
        hit->m_last_use.store(now, std::memory_order_relaxed);
        hint_slot(addr).store(hit, std::memory_order_relaxed);
        *out = hit;
        return UCS_OK;
    }

    // The new region: the request's pages, or the range of a region that
    // covers them with too little access; plus the access of everything it
    // subsumes.
    const uintptr_t nstart  = (cover != nullptr) ? cover->start() : start;
    const uintptr_t nend    = (cover != nullptr) ? cover->end() : end;
    unsigned        naccess = access;
    m_index.for_each_overlapping(nstart, nend, [&](region *r) {
        if ((r->start() >= nstart) && (r->end() <= nend)) {
            naccess |= r->access();
        }
        return true;
    });

    if (!make_room(end - start)) {
        lock.unlock();
        return get_private(start, end, access, false, out);
    }
    // Watch before registering: a change after the pages are pinned must
    // reach the ring (see uffd_monitor.cc).
    if (m_monitor->watch(nstart, nend) != UCS_OK) {
        lock.unlock();
        return get_private(start, end, access, false, out);
    }

    region *r = alloc_region();
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = m_backend->reg(reinterpret_cast<void *>(nstart), nend - nstart,
                                         naccess, false, &r->m_handle);
    if ((status == UCS_ERR_NO_MEMORY) && (evict_idle() > 0)) {
        // Out of locked memory or of the device's memory regions, maybe
        // because idle cached registrations hold them: give those back and
        // try once more.
        ++m_stats.reg_retries;
        zv_log_debug("zv rcache %s: registration of %zu bytes failed (%s): evicted the idle "
                     "regions, retrying", m_name, static_cast<size_t>(nend - nstart),
                     ucs_status_string(status));
        status = m_backend->reg(reinterpret_cast<void *>(nstart), nend - nstart, naccess, false,
                                &r->m_handle);
    }
    if (status != UCS_OK) {
        r->m_free_next = m_free;
        m_free         = r;
        if ((nstart == start) && (nend == end) && (naccess == access)) {
            return status;
        }
        // The wider range or access did not register (e.g. part of it is
        // read-only now): serve this request alone.
        lock.unlock();
        return get_private(start, end, access, false, out);
    }
    ++m_stats.registrations;

    r->m_start.store(nstart, std::memory_order_relaxed);
    r->m_end.store(nend, std::memory_order_relaxed);
    r->m_access.store(naccess, std::memory_order_relaxed);
    r->m_last_use.store(now, std::memory_order_relaxed);
    r->m_lru_stamp = now;
    r->m_fork_gen  = monitor::fork_generation();
    const uint64_t version = r->m_state.load(std::memory_order_relaxed) &
                             ~(region::k_cached | region::k_refmask);

    if (!m_monitor->cacheable(nstart, nend)) {
        // Registered, handed out, released at put(): never looked up.
        r->m_state.store(version | 1, std::memory_order_release);
        m_uncached.fetch_add(1, std::memory_order_relaxed);
        *out = r;
        return UCS_OK;
    }

    retire_matching(nstart, nend, [&](region *o) {
        return (o->start() >= nstart) && (o->end() <= nend);
    }, false);

    r->m_state.store(version | region::k_cached | 1, std::memory_order_release);
    if (!m_index.insert(r)) {
        r->m_state.store(version | 1, std::memory_order_release);
        m_uncached.fetch_add(1, std::memory_order_relaxed);
        *out = r;
        return UCS_OK;
    }
    lru_push_head(r);
    ++m_stats.cached_regions;
    m_stats.cached_bytes += nend - nstart;
    hint_slot(addr).store(r, std::memory_order_relaxed);
    *out = r;
    return UCS_OK;
}

void cache::flush()
{
    std::lock_guard<std::mutex> guard(m_lock);
    if ((m_events.load(std::memory_order_relaxed) != &m_never) &&
        (m_fork_gen == monitor::fork_generation())) {
        drain_events();
        invalidate_all();
    }
}

size_t cache::purge_idle()
{
    std::lock_guard<std::mutex> guard(m_lock);
    if ((m_events.load(std::memory_order_relaxed) == &m_never) ||
        (m_fork_gen != monitor::fork_generation()) || !m_backend->purge_before_fork()) {
        return 0; // caches nothing, the regions are a parent's, or they do no harm
    }
    const size_t n = evict_idle();
    if (n > 0) {
        zv_log_debug("zv rcache %s: %zu idle regions deregistered before a fork", m_name, n);
    }
    return n;
}

cache_stats cache::stats()
{
    std::lock_guard<std::mutex> guard(m_lock);
    cache_stats s = m_stats;
    s.uncached    = m_uncached.load(std::memory_order_relaxed);
    s.registrations += m_private_regs.load(std::memory_order_relaxed);
    s.deregistrations += m_private_deregs.load(std::memory_order_relaxed);
    s.max_regions = m_limits.max_regions;
    s.max_size    = m_limits.max_size;
    return s;
}

const char *cache::mode_name()
{
    std::lock_guard<std::mutex> guard(m_lock);
    return m_mode;
}

} // namespace zv::rcache
