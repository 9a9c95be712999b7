// SPDX-License-Identifier: BSD-3-Clause
// Bounded, lock-free broadcast ring of invalidated ranges (see event_ring.h).
#include "monitor/event_ring.h"

#include "util/log.h"

#include <sched.h>
#include <time.h>
#include <sys/mman.h>

#include <cerrno>
#include <new>

namespace zv::monitor {

ucs_status_t event_ring::create(size_t capacity, bool shared, event_ring **out)
{
    size_t cap = 16;
    while (cap < capacity) {
        cap <<= 1;
    }

    const size_t header = (sizeof(event_ring) + 63) & ~size_t(63);
    const size_t size   = header + cap * sizeof(slot);
    const int    flags  = MAP_ANONYMOUS | (shared ? MAP_SHARED : MAP_PRIVATE);
    void        *mem    = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (mem == MAP_FAILED) {
        zv_log_error("mmap(%zu) for the invalidation queue failed: %m", size);
        return UCS_ERR_NO_MEMORY;
    }

    auto *ring       = new (mem) event_ring();
    ring->m_mask     = cap - 1;
    ring->m_map_size = size;
    ring->m_slots    = reinterpret_cast<slot *>(static_cast<char *>(mem) + header);
    for (size_t i = 0; i < cap; ++i) {
        new (&ring->m_slots[i]) slot{};
    }
    *out = ring;
    return UCS_OK;
}

void event_ring::destroy(event_ring *ring)
{
    if (ring == nullptr) {
        return;
    }
    const size_t size = ring->m_map_size;
    ring->~event_ring();
    if (munmap(ring, size) != 0) {
        zv_log_warn("munmap of the invalidation queue failed: %m");
    }
}

void event_ring::push(uintptr_t start_addr, uintptr_t end_addr) noexcept
{
    begin();
    const uint64_t i = m_reserved.fetch_add(1, std::memory_order_acq_rel);
    slot          &s = m_slots[i & m_mask];

    // The previous lap of this slot must be complete; if a producer from
    // capacity() pushes ago is still writing it, two writers would tear the
    // slot. Never wait: count an overflow, which makes every consumer drop
    // everything, and write anyway.
    const uint64_t prev = s.seq.load(std::memory_order_relaxed);
    if ((i >= capacity()) && (prev != 2 * (i - capacity()) + 2)) {
        m_overflow.fetch_add(1, std::memory_order_release);
    }

    s.seq.store(2 * i + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.start.store(start_addr, std::memory_order_relaxed);
    s.end.store(end_addr, std::memory_order_relaxed);
    s.seq.store(2 * i + 2, std::memory_order_release);
    end();
}

uint64_t event_ring::wait_quiescent(unsigned timeout_ms, bool *timed_out) const noexcept
{
    struct timespec start = {};
    if (timed_out != nullptr) {
        *timed_out = false;
    }
    for (unsigned spins = 0;; ++spins) {
        const uint64_t e = m_ends.load(std::memory_order_acquire);
        const uint64_t b = m_begins.load(std::memory_order_acquire);
        // ends <= begins always, and begins only grows: equal values read in
        // this order mean that at the moment ends was read no producer was
        // in progress.
        if (e == b) {
            return b;
        }
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        sched_yield();
        if ((spins & 1023) == 64) {
            struct timespec t = {};
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (spins == 64) {
                start = t;
            } else if ((t.tv_sec - start.tv_sec) * 1000 + (t.tv_nsec - start.tv_nsec) / 1000000 >
                       static_cast<long>(timeout_ms)) {
                if (timed_out != nullptr) {
                    *timed_out = true;
                }
                return b;
            }
        }
    }
}

event_ring::cursor event_ring::make_cursor() const noexcept
{
    cursor c;
    c.next          = m_reserved.load(std::memory_order_acquire);
    c.overflow_seen = m_overflow.load(std::memory_order_acquire);
    return c;
}

} // namespace zv::monitor
