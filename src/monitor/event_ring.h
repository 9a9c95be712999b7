// SPDX-License-Identifier: BSD-3-Clause
// Bounded, lock-free broadcast ring of invalidated ranges: monitors produce, caches consume.
#ifndef ZV_MONITOR_EVENT_RING_H_
#define ZV_MONITOR_EVENT_RING_H_

#include <ucs/type/status.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zv::monitor {

// Producers are the uffd monitor thread (or helper process), UCM callbacks
// running inside munmap() on any thread, and the fork handler. None of them
// may block or take a lock (an unmapper may hold any lock), so producing is
// a few atomic operations and never waits for a consumer. A slow consumer is
// lapped instead; it notices (slot sequence or overflow counter) and treats
// the loss as "everything was invalidated". That is the bound on the queue.
//
// Besides the slots there are two counters, m_begins and m_ends. Every
// producer increments m_begins before it does anything and m_ends after its
// slot is complete. A cache reads m_begins on every lookup: equal to what it
// saw after its last drain means no producer has started since, so nothing
// it has not applied can have happened-before this lookup. The uffd monitor
// also brackets its read() of kernel events with begin()/end(), because the
// kernel releases the unmapping thread as soon as read() returns, before the
// ranges reach the slots (see uffd_monitor.cc).
//
// The object lives in its own mapping so that, under valgrind, a helper
// process can produce into it (MAP_SHARED); otherwise it is MAP_PRIVATE so a
// fork child gets its own copy.
class event_ring {
public:
    struct slot {
        std::atomic<uint64_t>  seq;   // 2*i+1 while index i is written, 2*i+2 when done
        std::atomic<uintptr_t> start;
        std::atomic<uintptr_t> end;
    };

    // Where a consumer stands. Owned by one consumer, used under its lock.
    struct cursor {
        uint64_t next          = 0;
        uint64_t overflow_seen = 0;
    };

    // capacity is rounded up to a power of two, at least 16.
    [[nodiscard]] static ucs_status_t create(size_t capacity, bool shared, event_ring **out);
    static void destroy(event_ring *ring);

    event_ring(const event_ring &) = delete;
    event_ring &operator=(const event_ring &) = delete;

    // --- producer side: lock-free, never waits, async-signal-safe ---
    void begin() noexcept { m_begins.fetch_add(1, std::memory_order_seq_cst); }
    void end() noexcept { m_ends.fetch_add(1, std::memory_order_release); }
    // Publishes [start, end) (page-rounding is the consumer's business).
    void push(uintptr_t start_addr, uintptr_t end_addr) noexcept;
    // Makes every consumer drop everything (used when a producer lost events).
    void push_all() noexcept { push(0, UINTPTR_MAX); }
    // Forces every consumer through its slow path once (fork child).
    void poke() noexcept { begin(); end(); }

    // --- consumer side ---
    // The word each lookup compares with the value its cache saw last.
    const std::atomic<uint64_t> &begins() const noexcept { return m_begins; }

    // Waits (spinning, then yielding) until every producer that has begun has
    // ended, and returns m_begins at that instant. Producers never wait for
    // anything, so this is bounded by their scheduling; a producer that died
    // inside begin/end (a killed helper process) would hold it forever, so
    // after timeout_ms it gives up and sets *timed_out (when given).
    uint64_t wait_quiescent(unsigned timeout_ms = 5000, bool *timed_out = nullptr) const noexcept;

    // Starts a new consumer at the current end of the ring.
    cursor make_cursor() const noexcept;

    // Calls fn(start, end) for every complete slot from c.next on. Returns
    // false when events were lost (lapped or a producer overflowed): the
    // consumer must then treat everything as invalidated; c is moved past the
    // loss either way.
    template <class Fn> bool drain(cursor &c, Fn &&fn) const noexcept;

    // A producer that can no longer deliver events (e.g. read() on the
    // userfaultfd failed) records errno here; caches check it when draining.
    void set_error(int err) noexcept { m_error.store(err, std::memory_order_release); }
    int error() const noexcept { return m_error.load(std::memory_order_acquire); }

    size_t capacity() const noexcept { return m_mask + 1; }
    uint64_t produced() const noexcept { return m_reserved.load(std::memory_order_relaxed); }

private:
    event_ring() = default;

    alignas(64) std::atomic<uint64_t> m_begins{0};
    alignas(64) std::atomic<uint64_t> m_ends{0};
    alignas(64) std::atomic<uint64_t> m_reserved{0};
    std::atomic<uint64_t>             m_overflow{0};
    std::atomic<int>                  m_error{0};
    alignas(64) uint64_t              m_mask = 0;
    size_t                            m_map_size = 0;
    slot                             *m_slots = nullptr;
};

template <class Fn> bool event_ring::drain(cursor &c, Fn &&fn) const noexcept
{
    const uint64_t target = m_reserved.load(std::memory_order_acquire);
    bool           intact = true;

    if (target - c.next > capacity()) {
        c.next = target - capacity();
        intact = false;
    }

    for (; c.next != target; ++c.next) {
        const slot    &s    = m_slots[c.next & m_mask];
        const uint64_t want = 2 * c.next + 2;
        const uint64_t seq1 = s.seq.load(std::memory_order_acquire);
        if (seq1 < want) {
            // Reserved by a producer that began after the caller's quiescent
            // point: it bumped m_begins, so the next lookup drains again.
            break;
        }
        const uintptr_t start = s.start.load(std::memory_order_relaxed);
        const uintptr_t end   = s.end.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if ((seq1 != want) || (s.seq.load(std::memory_order_relaxed) != want)) {
            intact = false; // lapped while reading
            continue;
        }
        fn(start, end);
    }

    const uint64_t overflow = m_overflow.load(std::memory_order_acquire);
    if (overflow != c.overflow_seen) {
        c.overflow_seen = overflow;
        intact          = false;
    }
    return intact;
}

} // namespace zv::monitor

#endif
