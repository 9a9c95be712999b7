// SPDX-License-Identifier: BSD-3-Clause
// The invalidation queue: order, bound, overflow, quiescence, many producers.
#include "monitor/event_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace zv::test {
namespace {

using monitor::event_ring;

struct ring_holder {
    event_ring *ring = nullptr;
    explicit ring_holder(size_t cap) { EXPECT_EQ(UCS_OK, event_ring::create(cap, false, &ring)); }
    ~ring_holder() { event_ring::destroy(ring); }
};

TEST(monitor_ring, delivers_in_order)
{
    ring_holder h(16);
    auto        cur = h.ring->make_cursor();
    for (uintptr_t i = 1; i <= 10; ++i) {
        h.ring->push(i * 4096, i * 4096 + 4096);
    }
    std::vector<uintptr_t> got;
    EXPECT_TRUE(h.ring->drain(cur, [&](uintptr_t s, uintptr_t e) {
        EXPECT_EQ(s + 4096, e);
        got.push_back(s);
    }));
    ASSERT_EQ(10u, got.size());
    for (uintptr_t i = 0; i < 10; ++i) {
        EXPECT_EQ((i + 1) * 4096, got[i]);
    }
    EXPECT_TRUE(h.ring->drain(cur, [&](uintptr_t, uintptr_t) { FAIL(); }));
}

TEST(monitor_ring, bounded_overflow_is_reported)
{
    ring_holder h(16);
    EXPECT_EQ(16u, h.ring->capacity());
    auto cur = h.ring->make_cursor();
    for (int i = 0; i < 40; ++i) {
        h.ring->push(i, i + 1);
    }
    int n = 0;
    EXPECT_FALSE(h.ring->drain(cur, [&](uintptr_t, uintptr_t) { ++n; }))
        << "a lapped consumer must be told to drop everything";
    EXPECT_LE(n, 16);
    h.ring->push(1, 2);
    EXPECT_TRUE(h.ring->drain(cur, [&](uintptr_t, uintptr_t) {}));
}

TEST(monitor_ring, quiescence_waits_for_open_producers)
{
    ring_holder       h(16);
    std::atomic<bool> waited{false};
    h.ring->begin();
    const uint64_t before = h.ring->begins().load();
    std::thread    t([&] {
        h.ring->wait_quiescent();
        waited = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(waited.load()) << "returned while a producer was inside begin/end";
    h.ring->end();
    t.join();
    EXPECT_EQ(before, h.ring->wait_quiescent());
}

TEST(monitor_ring, many_producers_lose_nothing_unless_told)
{
    ring_holder              h(1024);
    auto                     cur = h.ring->make_cursor();
    constexpr int            k_per = 20000, k_threads = 3;
    std::atomic<int>         done{0};
    std::vector<std::thread> producers;
    for (int t = 0; t < k_threads; ++t) {
        producers.emplace_back([&, t] {
            for (int i = 0; i < k_per; ++i) {
                h.ring->push(uintptr_t(t) << 32 | i, (uintptr_t(t) << 32 | i) + 1);
            }
            ++done;
        });
    }
    uint64_t received = 0;
    bool     lost     = false;
    while (done.load() < k_threads || received + (lost ? 0 : 0) < h.ring->produced()) {
        h.ring->wait_quiescent();
        lost |= !h.ring->drain(cur, [&](uintptr_t s, uintptr_t e) {
            EXPECT_EQ(s + 1, e);
            ++received;
        });
        if (lost) {
            break;
        }
    }
    for (auto &t : producers) {
        t.join();
    }
    if (!lost) {
        h.ring->wait_quiescent();
        lost = !h.ring->drain(cur, [&](uintptr_t, uintptr_t) { ++received; });
    }
    if (!lost) {
        EXPECT_EQ(uint64_t(k_per) * k_threads, received);
    }
}

} // namespace
} // namespace zv::test
