// SPDX-License-Identifier: BSD-3-Clause
// Concurrency and endurance: threads registering while others unmap; map/unmap cycles stay bounded.
#include "fake_env.h"

#include <chrono>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace zv::test {
namespace {

class rcache_stress : public cache_fixture {
protected:
    void register_while_unmapping(bool flusher);
};

// Getters hold a slot's lock shared while they get, check and put; the
// unmapper holds it exclusively while it replaces the slot's pages. A stale
// hit can therefore only come from the cache, never from a test race. With
// 'flusher', one more thread drops everything (cache::flush(), what a lost
// event or a fork does) again and again meanwhile.
void rcache_stress::register_while_unmapping(bool flusher)
{
    constexpr int k_slots = 16, k_pages = 4;
    struct slot {
        std::shared_mutex lock;
        char             *addr = nullptr;
    };
    std::vector<slot> slots(k_slots);
    for (auto &s : slots) {
        s.addr = map_pages(k_pages);
        ASSERT_NE(nullptr, s.addr);
        touch(s.addr, k_pages * k_page);
    }

    const int               iters = std::max(200, static_cast<int>(20000 * test_scale()));
    std::atomic<bool>       stop{false};
    std::atomic<int>        failures{0};
    std::vector<std::thread> getters;
    for (int t = 0; t < 3; ++t) {
        getters.emplace_back([&, t] {
            unsigned seed = 1234 + t;
            for (int i = 0; i < iters; ++i) {
                slot &s = slots[rand_r(&seed) % k_slots];
                std::shared_lock<std::shared_mutex> guard(s.lock);
                const size_t    off = (rand_r(&seed) % k_pages) * k_page;
                rcache::region *r   = nullptr;
                if (m_cache->get(s.addr + off, k_page, k_access, &r) != UCS_OK) {
                    ++failures;
                    continue;
                }
                if (!m_be.check(r, s.addr + off, k_page)) {
                    ++failures;
                }
                m_cache->put(r);
            }
        });
    }
    std::thread unmapper([&] {
        unsigned seed = 99;
        int      n    = 0;
        while (!stop.load()) {
            slot &s = slots[rand_r(&seed) % k_slots];
            std::unique_lock<std::shared_mutex> guard(s.lock);
            switch (n++ % 3) {
            case 0: // munmap + map again at the same place
                munmap(s.addr, k_pages * k_page);
                if (map_pages(k_pages, s.addr) != s.addr) {
                    ++failures;
                }
                break;
            case 1: // mmap(MAP_FIXED) over it
                mmap(s.addr, k_pages * k_page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                break;
            default:
                madvise(s.addr, k_pages * k_page, MADV_DONTNEED);
                break;
            }
            touch(s.addr, k_pages * k_page, static_cast<char>(n));
        }
    });
    std::thread flushes;
    if (flusher) {
        flushes = std::thread([&] {
            while (!stop.load()) {
                m_cache->flush();
                std::this_thread::yield();
            }
        });
    }
    for (auto &t : getters) {
        t.join();
    }
    stop = true;
    unmapper.join();
    if (flusher) {
        flushes.join();
    }
    EXPECT_EQ(0, failures.load());
    for (auto &s : slots) {
        munmap(s.addr, k_pages * k_page);
    }
}

TEST_P(rcache_stress, threads_register_while_others_unmap)
{
    register_while_unmapping(false);
}

TEST_P(rcache_stress, threads_register_while_others_unmap_and_flush)
{
    if (!caching()) {
        GTEST_SKIP() << "no cache to flush";
    }
    register_while_unmapping(true);
}

// Hits from many threads on the same regions: no registrations after warm-up.
TEST_P(rcache_stress, concurrent_hits)
{
    char *p = map_pages(64);
    touch(p, 64 * k_page);
    for (int i = 0; i < 64; ++i) {
        use(p + i * k_page, k_page);
    }
    const uint64_t regs  = m_be.regs();
    const int      iters = std::max(1000, static_cast<int>((caching() ? 200000 : 20000) *
                                                              test_scale()));
    std::vector<std::thread> threads;
    std::atomic<int>         failures{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < iters; ++i) {
                rcache::region *r = nullptr;
                char           *a = p + ((i * 7 + t) % 64) * k_page;
                if ((m_cache->get(a, 64, k_access, &r) != UCS_OK) ||
                    (r->start() > reinterpret_cast<uintptr_t>(a))) {
                    ++failures;
                    continue;
                }
                m_cache->put(r);
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    EXPECT_EQ(0, failures.load());
    if (caching()) {
        EXPECT_EQ(regs, m_be.regs()) << "hits must not register";
    }
    munmap(p, 64 * k_page);
}

// Map, register, release, unmap, again and again: the cache, the
// registrations, the uffd-registered mappings and the process stay bounded.
// Every cycle is checked for staleness in the first part; the long part
// (a few hundred thousand cycles) counts registrations only, because pinning
// and reading page frames would dominate its time.
class rcache_cycles : public cache_fixture {
protected:
    void cycle(int i, bool check)
    {
        // The long loop maps one page and touches it only where the monitor
        // needs it present (uffd caches private anonymous pages it has seen
        // in /proc/self/pagemap): a first touch plus the munmap of a
        // populated page costs ~60 us on this VM, whatever the cache does.
        const size_t pages = check ? 1 + (i % 4) : 1;
        char        *p     = map_pages(pages);
        ASSERT_NE(nullptr, p);
        if (check || is_uffd()) {
            touch(p, pages * k_page);
        }
        rcache::region *r = nullptr;
        ASSERT_EQ(UCS_OK, m_cache->get(p, pages * k_page, k_access, &r));
        if (check) {
            EXPECT_TRUE(m_be.check(r, p, pages * k_page));
        }
        m_cache->put(r);
        munmap(p, pages * k_page);
    }
};

TEST_P(rcache_cycles, checked_cycles)
{
    const int cycles = std::max(500, static_cast<int>(5000 * test_scale()));
    for (int i = 0; i < cycles && !HasFatalFailure(); ++i) {
        cycle(i, true);
    }
}

TEST_P(rcache_cycles, few_hundred_thousand_cycles_stay_bounded)
{
    m_be.set_light(true);
    // 300,000 cycles; 150,000 for uffd (each of its cycles faults a page in)
    // and 20,000 for the legacy missing mode, to stay within a minute.
    const int base   = !is_uffd() ? 300000 :
                       (GetParam().uffd == rcache::uffd_mode::missing) ? 20000 : 150000;
    const int cycles = std::max(2000, static_cast<int>(base * test_scale()));
    for (int i = 0; i < 1000; ++i) {
        cycle(i, false);
    }
    const size_t rss0 = rss_bytes(), vmas0 = vma_count();
    for (int i = 0; i < cycles && !HasFatalFailure(); ++i) {
        cycle(i, false);
    }
    const auto s = m_cache->stats();
    EXPECT_LE(s.cached_regions, s.max_regions);
    EXPECT_LE(m_be.live(), s.max_regions);
    EXPECT_LT(rss_bytes(), rss0 + (16 << 20)) << "resident memory grew";
    EXPECT_LT(vma_count(), vmas0 + 64) << "mappings piled up";
    if (caching()) {
        EXPECT_GE(s.invalidations + s.evictions + s.flushes * 1000,
                  static_cast<uint64_t>(cycles) / 2);
    }
    RecordProperty("cycles", cycles);
}

INSTANTIATE_TEST_SUITE_P(monitors, rcache_cycles, testing::ValuesIn(k_all_monitors), param_name);

INSTANTIATE_TEST_SUITE_P(monitors, rcache_stress, testing::ValuesIn(k_all_monitors), param_name);

} // namespace
} // namespace zv::test
