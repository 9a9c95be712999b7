// SPDX-License-Identifier: BSD-3-Clause
// iface::async_gate: the worker and the async side of an interface take
// turns without the worker paying a lock (iface/async_gate.h). Two threads
// update plain state under the gate; under TSAN (test/unit/tsan.sh) any
// access the handshake does not order is a reported race.
#include "iface/async_gate.h"

#include <gtest/gtest.h>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace zv::test {
namespace {

bool have_membarrier()
{
    return syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0;
}

/// What both sides touch: plain fields, as an interface's.
struct shared_state {
    uint64_t count  = 0;
    uint64_t worker = 0; ///< the worker's own count
    bool     inside = false;
    uint64_t overlaps = 0;
};

void touch(shared_state &s)
{
    if (s.inside) {
        ++s.overlaps; // the other side is in: the gate failed
    }
    s.inside         = true;
    const uint64_t c = s.count;
    for (volatile int k = 0; k < 200; k = k + 1) {
        // a while inside, as a progress call: wide enough to be caught in
    }
    s.count  = c + 1;
    s.inside = false;
}

TEST(async_gate, the_worker_and_the_async_side_never_run_at_once)
{
    if (!have_membarrier()) {
        GTEST_SKIP() << "membarrier(2) unavailable: the async side never runs here";
    }
    iface::async_gate gate;
    shared_state s;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> async_runs{0};
    uint64_t async_tries = 0;
    std::thread async([&] {
        while (!stop.load(std::memory_order_acquire)) {
            ++async_tries;
            if (iface::async_try_enter(&gate)) {
                touch(s);
                async_runs.store(async_runs.load(std::memory_order_relaxed) + 1,
                                 std::memory_order_relaxed);
                iface::async_leave(&gate);
            }
            std::this_thread::yield();
        }
    });
    // At least 200000 rounds, and until the async side had 1000 turns
    // (within 60 s: its first turn waits for membarrier's registration, and
    // each membarrier(2) waits for every CPU, which a loaded host gives
    // late: one run beside three busy VMs had 775 turns in 20 s).
    const uint64_t n = 200000;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (uint64_t i = 0; (i < n) || ((async_runs.load(std::memory_order_relaxed) < 1000) &&
                                     (std::chrono::steady_clock::now() < until));
         ++i) {
        {
            iface::worker_scope outer(&gate);
            touch(s);
            if ((i & 7) == 0) {
                iface::worker_scope nested(&gate); // a callback that re-enters
                touch(s);
                ++s.worker;
            }
            ++s.worker;
        }
        if ((i & 255) == 0) {
            std::this_thread::yield(); // away a while: the async side's turn
        }
    }
    stop.store(true, std::memory_order_release);
    async.join();
    EXPECT_EQ(0u, s.overlaps);
    EXPECT_EQ(s.worker + async_runs.load(), s.count) << "an update was lost";
    // (100 turns among the worker's 200000 rounds: enough to have raced)
    EXPECT_GE(async_runs.load(), 100u) << "the async side had few turns in " << async_tries
                                       << " tries";
}

TEST(async_gate, the_async_side_backs_off_while_the_worker_is_inside)
{
    if (!have_membarrier()) {
        GTEST_SKIP() << "membarrier(2) unavailable: the async side never runs here";
    }
    iface::async_gate gate;
    {
        iface::worker_scope scope(&gate);
        EXPECT_FALSE(iface::async_try_enter(&gate));
        EXPECT_FALSE(gate.async_in.load()) << "it left its flag up";
    }
    ASSERT_TRUE(iface::async_try_enter(&gate));
    iface::async_leave(&gate);
}

/// A sleeping timer (async_timer) is woken by the worker's next entry
/// point, once, from the same test of 'async_in' that waits for a running
/// async side.
TEST(async_gate, the_worker_wakes_a_sleeping_timer_once)
{
    iface::async_gate gate;
    static int wakes;
    wakes         = 0;
    gate.wake     = [](void *arg) {
        auto *g = static_cast<iface::async_gate *>(arg);
        ++wakes;
        g->async_in.fetch_and(~iface::async_gate::asleep);
    };
    gate.wake_arg = &gate;
    { iface::worker_scope scope(&gate); }
    EXPECT_EQ(0, wakes) << "woken while it was not asleep";
    gate.async_in.fetch_or(iface::async_gate::asleep);
    {
        iface::worker_scope scope(&gate);
        EXPECT_EQ(1, wakes);
        iface::worker_scope nested(&gate);
    }
    { iface::worker_scope scope(&gate); }
    EXPECT_EQ(1, wakes) << "woken again";
    EXPECT_EQ(0, gate.async_in.load());
}

} // namespace
} // namespace zv::test
