// SPDX-License-Identifier: BSD-3-Clause
// The C API (libzverbs) over the fake backend: what a verbs program relies on.
#include "capi/zverbs_internal.h"
#include "fake_env.h"
#include "util/log.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

extern "C" int zv_test_c_api(zv_cache_t *cache, void *buf, size_t len);

namespace zv::test {
namespace {

constexpr unsigned k_lw  = IBV_ACCESS_LOCAL_WRITE;
constexpr unsigned k_rw  = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

size_t count_entries(const char *dir)
{
    size_t n = 0;
    DIR   *d = opendir(dir);
    if (d != nullptr) {
        while (readdir(d) != nullptr) {
            ++n;
        }
        closedir(d);
    }
    return n;
}

// The library's default: the cache and monitors log nothing (libzverbs sets
// this when it loads); log_guard fails any test that still logs a problem.
class capi_quiet {
public:
    capi_quiet() { capi::set_log_level(nullptr); }
    ~capi_quiet() { zv::g_log_cap.store(UCS_LOG_LEVEL_LAST); }
};

zv_cache_params params_for(const char *monitor)
{
    zv_cache_params p;
    zv_cache_params_init(&p);
    p.monitor     = monitor;
    p.max_regions = 4096;
    p.max_size    = size_t(1) << 30;
    return p;
}

class capi_cache : public testing::TestWithParam<const char *> {
protected:
    void SetUp() override
    {
        zv_cache_params p = params_for(GetParam());
        const int       rc = capi::open_on_backend(&m_be, &p, &m_cache);
        if (rc == -EOPNOTSUPP) {
            GTEST_SKIP() << GetParam() << " monitor cannot run here";
        }
        ASSERT_EQ(0, rc) << zv_strerror(rc);
        // A watched page unmapped returns once the monitor read the event:
        // its thread is running before the test unmaps anything.
        char *w = map_pages(1);
        ASSERT_NE(nullptr, w);
        touch(w, k_page);
        put(get(w, k_page));
        munmap(w, k_page);
        zv_cache_flush(m_cache); // tests start with an empty cache
        EXPECT_EQ(0u, stats().cached_regions);
    }

    void TearDown() override
    {
        if (m_cache != nullptr) {
            EXPECT_EQ(0, zv_cache_close(m_cache));
            EXPECT_EQ(0u, m_be.live()) << "registrations leaked";
        }
        EXPECT_EQ(0u, m_be.stale()) << "stale registration handed out";
    }

    bool caching() const { return std::strcmp(GetParam(), "none") != 0; }

    zv_region_t *get(void *p, size_t len, unsigned access = k_rw)
    {
        zv_region_t *r  = nullptr;
        const int    rc = zv_cache_get(m_cache, p, len, access, &r);
        EXPECT_EQ(0, rc) << zv_strerror(rc);
        if (r != nullptr) {
            EXPECT_TRUE(m_be.check(capi::to_region(r), p, len)) << "stale at " << p;
            const auto a = reinterpret_cast<uintptr_t>(zv_region_addr(r));
            EXPECT_LE(a, reinterpret_cast<uintptr_t>(p));
            EXPECT_GE(a + zv_region_length(r), reinterpret_cast<uintptr_t>(p) + len);
            EXPECT_EQ(access, zv_region_access(r) & access);
        }
        return r;
    }

    void put(zv_region_t *r)
    {
        if (r != nullptr) {
            zv_cache_put(m_cache, r);
        }
    }

    uint32_t use(void *p, size_t len, unsigned access = k_rw)
    {
        zv_region_t   *r   = get(p, len, access);
        const uint32_t key = (r != nullptr) ? zv_region_lkey(r) : 0;
        put(r);
        return key;
    }

    zv_cache_stats stats()
    {
        struct zv_cache_stats s;
        std::memset(&s, 0xff, sizeof(s));
        EXPECT_EQ(0, zv_cache_read_stats(m_cache, &s, sizeof(s)));
        return s;
    }

    capi_quiet   m_quiet;
    fake_backend m_be;
    zv_cache_t  *m_cache = nullptr;
};

TEST_P(capi_cache, monitor_is_the_one_asked_for)
{
    EXPECT_STREQ(GetParam(), zv_cache_monitor(m_cache));
}

TEST_P(capi_cache, hit_returns_the_same_keys)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint64_t regs0 = m_be.regs();
    zv_region_t   *r1   = get(p, 4 * k_page);
    ASSERT_NE(nullptr, r1);
    const uint32_t lkey = zv_region_lkey(r1), rkey = zv_region_rkey(r1);
    zv_region_t   *r2   = get(p + 100, 1000); // inside: the same registration
    ASSERT_NE(nullptr, r2);
    if (caching()) {
        EXPECT_EQ(lkey, zv_region_lkey(r2));
        EXPECT_EQ(rkey, zv_region_rkey(r2));
        EXPECT_EQ(regs0 + 1, m_be.regs()) << "one registration for both gets";
    } else {
        EXPECT_NE(lkey, zv_region_lkey(r2));
    }
    put(r2);
    put(r1);
    munmap(p, 4 * k_page);
}

TEST_P(capi_cache, access_upgrade)
{
    char *p = map_pages(2);
    touch(p, 2 * k_page);
    const uint32_t k1 = use(p, 2 * k_page, k_lw);
    const uint32_t k2 = use(p, 2 * k_page, k_rw); // more access: a new registration
    EXPECT_NE(k1, k2);
    const uint32_t k3 = use(p, 2 * k_page, k_lw); // the upgraded one serves less too
    if (caching()) {
        EXPECT_EQ(k2, k3);
    }
    munmap(p, 2 * k_page);
}

TEST_P(capi_cache, fresh_registration_after_munmap_and_mmap)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t k1 = use(p, 4 * k_page);
    const uint64_t before = stats().invalidations;
    ASSERT_EQ(0, munmap(p, 4 * k_page));
    ASSERT_EQ(p, map_pages(4, p));
    touch(p, 4 * k_page, 2);
    EXPECT_NE(k1, use(p, 4 * k_page));
    if (caching()) {
        EXPECT_GT(stats().invalidations, before);
    }
    munmap(p, 4 * k_page);
}

TEST_P(capi_cache, fresh_registration_after_mmap_fixed_and_madvise)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t k1 = use(p, 4 * k_page);
    void *q = mmap(p + k_page, k_page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(p + k_page, q);
    touch(p, 4 * k_page, 3);
    const uint32_t k2 = use(p, 4 * k_page);
    EXPECT_NE(k1, k2);
    ASSERT_EQ(0, madvise(p, 4 * k_page, MADV_DONTNEED));
    touch(p, 4 * k_page, 4);
    EXPECT_NE(k2, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
}

TEST_P(capi_cache, invalidated_while_held_is_released_at_put)
{
    char *p = map_pages(2);
    touch(p, 2 * k_page);
    zv_region_t *r = get(p, 2 * k_page);
    ASSERT_NE(nullptr, r);
    const size_t live = m_be.live();
    ASSERT_EQ(0, munmap(p, 2 * k_page));
    ASSERT_EQ(p, map_pages(2, p));
    touch(p, 2 * k_page, 5);
    const uint32_t fresh = use(p, 2 * k_page);
    EXPECT_NE(zv_region_lkey(r), fresh);
    put(r); // the last holder deregisters it
    if (caching()) {
        EXPECT_EQ(live, m_be.live()) << "the replaced registration is gone, the new one cached";
    }
    munmap(p, 2 * k_page);
}

TEST_P(capi_cache, stats_count_misses_hits_and_registrations)
{
    const struct zv_cache_stats s0 = stats();
    char *p = map_pages(8);
    touch(p, 8 * k_page);
    for (int i = 0; i < 5; ++i) {
        use(p, 8 * k_page);
    }
    const struct zv_cache_stats s1 = stats();
    EXPECT_EQ(4096u, s1.max_regions);
    EXPECT_EQ(size_t(1) << 30, s1.max_size);
    if (caching()) {
        EXPECT_EQ(s0.misses + 1, s1.misses);
        EXPECT_EQ(s0.registrations + 1, s1.registrations);
        EXPECT_EQ(s0.cached_regions + 1, s1.cached_regions);
        EXPECT_EQ(s0.cached_bytes + 8 * k_page, s1.cached_bytes);
    } else {
        EXPECT_EQ(s0.registrations + 5, s1.registrations);
        EXPECT_EQ(s0.deregistrations + 5, s1.deregistrations);
    }
    // A caller that knows a shorter struct gets only its fields written.
    struct zv_cache_stats part;
    std::memset(&part, 0xab, sizeof(part));
    EXPECT_EQ(0, zv_cache_read_stats(m_cache, &part, offsetof(zv_cache_stats, evictions)));
    EXPECT_EQ(s1.registrations, part.registrations);
    EXPECT_EQ(0xababababababababull, part.evictions);
    munmap(p, 8 * k_page);
}

TEST_P(capi_cache, close_with_regions_held_is_ebusy_and_keeps_the_cache)
{
    char *p = map_pages(2);
    touch(p, 2 * k_page);
    zv_region_t *r = get(p, 2 * k_page);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(-EBUSY, zv_cache_close(m_cache));
    EXPECT_EQ(zv_region_lkey(r), zv_region_lkey(r));
    put(r);
    const uint32_t again = use(p, 2 * k_page); // still usable
    EXPECT_NE(0u, again);
    EXPECT_EQ(0, zv_cache_close(m_cache));
    m_cache = nullptr;
    EXPECT_EQ(0u, m_be.live());
    munmap(p, 2 * k_page);
}

TEST_P(capi_cache, fork_child_bypasses_the_parents_registrations)
{
    char *p = map_pages(2);
    touch(p, 2 * k_page);
    const uint32_t parent_key = use(p, 2 * k_page);
    const pid_t    pid        = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Only async-signal-safe-ish checks here; the exit code says which failed.
        zv_region_t *r = nullptr;
        if (zv_cache_get(m_cache, p, 2 * k_page, k_rw, &r) != 0) {
            _exit(2);
        }
        const bool fresh  = zv_region_lkey(r) != parent_key;
        const bool bypass = std::strcmp(zv_cache_monitor(m_cache), "fork-bypass") == 0;
        zv_cache_put(m_cache, r);
        _exit(!fresh ? 3 : ((caching() && !bypass) ? 4 : 0));
    }
    int status = -1;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "2: get failed, 3: the parent's registration, "
                                         "4: not in fork-bypass mode";
    if (caching()) {
        EXPECT_EQ(parent_key, use(p, 2 * k_page)) << "the parent's cache is untouched";
    }
    munmap(p, 2 * k_page);
}

TEST_P(capi_cache, from_c)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    EXPECT_EQ(0, zv_test_c_api(m_cache, p, 4 * k_page)) << "line of the failed check";
    munmap(p, 4 * k_page);
}

INSTANTIATE_TEST_SUITE_P(monitors, capi_cache, testing::Values("uffd", "ucm", "none"),
                         [](const testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param);
                         });

TEST(capi_params, bad_values_are_errors)
{
    capi_quiet     quiet;
    fake_backend   be;
    zv_cache_t    *c = nullptr;
    zv_cache_params p;
    zv_cache_params_init(&p);
    EXPECT_EQ(sizeof(p), p.size);
    EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, nullptr));
    EXPECT_EQ(-EINVAL, capi::open_on_backend(nullptr, &p, &c));
    p.size = 0;
    EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
    zv_cache_params_init(&p);
    p.max_size = 0;
    EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
    zv_cache_params_init(&p);
    p.max_regions = 0;
    EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
    EXPECT_EQ(nullptr, c);
    EXPECT_EQ(-EINVAL, zv_cache_open(nullptr, nullptr, &c));
    EXPECT_EQ(-EINVAL, zv_cache_close(nullptr));
    EXPECT_EQ(-EINVAL, zv_cache_read_stats(nullptr, nullptr, 0));
    EXPECT_STREQ("none", zv_cache_monitor(nullptr));
    EXPECT_NE(nullptr, zv_strerror(-EINVAL));
    EXPECT_NE(nullptr, zv_strerror(12345));
    EXPECT_EQ(0u, be.live());
}

TEST(capi_params, unknown_monitor_is_an_error_and_leaks_nothing)
{
    capi_quiet   quiet; // and log_guard: nothing printed
    fake_backend be;
    // Open and close one first, so the allocator's and the monitor's first-use
    // costs are paid before counting.
    zv_cache_t     *c = nullptr;
    zv_cache_params p = params_for("auto");
    ASSERT_EQ(0, capi::open_on_backend(&be, &p, &c));
    ASSERT_EQ(0, zv_cache_close(c));
    const size_t fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
    c = nullptr;
    p = params_for("uffdd");
    EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
    EXPECT_EQ(nullptr, c);
    EXPECT_EQ(fds, count_entries("/proc/self/fd"));
    EXPECT_EQ(threads, count_entries("/proc/self/task"));
    EXPECT_EQ(0u, be.regs() - be.deregs());
}

TEST(capi_params, names_are_case_insensitive_and_auto_prefers_uffd)
{
    capi_quiet      quiet;
    fake_backend    be;
    zv_cache_t     *c = nullptr;
    zv_cache_params p = params_for("NONE");
    ASSERT_EQ(0, capi::open_on_backend(&be, &p, &c));
    EXPECT_STREQ("none", zv_cache_monitor(c));
    ASSERT_EQ(0, zv_cache_close(c));
    p.monitor = nullptr; // the default: auto
    ASSERT_EQ(0, capi::open_on_backend(&be, &p, &c));
    zv_cache_t *u  = nullptr;
    zv_cache_params pu = params_for("uffd");
    if (capi::open_on_backend(&be, &pu, &u) == 0) {
        EXPECT_STREQ("uffd", zv_cache_monitor(c));
        ASSERT_EQ(0, zv_cache_close(u));
    } else {
        EXPECT_STRNE("uffd", zv_cache_monitor(c));
    }
    ASSERT_EQ(0, zv_cache_close(c));
}

TEST(capi_params, caches_share_one_uffd_monitor)
{
    capi_quiet      quiet;
    fake_backend    be1, be2;
    zv_cache_t     *c1 = nullptr, *c2 = nullptr;
    zv_cache_params p = params_for("uffd");
    if (capi::open_on_backend(&be1, &p, &c1) != 0) {
        GTEST_SKIP() << "uffd monitor cannot run here";
    }
    ASSERT_EQ(0, capi::open_on_backend(&be2, &p, &c2));
    char *b = map_pages(2);
    touch(b, 2 * k_page);
    zv_region_t *r1 = nullptr, *r2 = nullptr;
    ASSERT_EQ(0, zv_cache_get(c1, b, 2 * k_page, k_rw, &r1));
    ASSERT_EQ(0, zv_cache_get(c2, b, 2 * k_page, k_rw, &r2));
    zv_cache_put(c1, r1);
    zv_cache_put(c2, r2);
    struct zv_cache_stats s1, s2;
    ASSERT_EQ(0, zv_cache_read_stats(c1, &s1, sizeof(s1)));
    ASSERT_EQ(0, zv_cache_read_stats(c2, &s2, sizeof(s2)));
    EXPECT_EQ(0u, s1.uncached + s2.uncached) << "both caches watch the same memory";
    ASSERT_EQ(0, munmap(b, 2 * k_page));
    ASSERT_EQ(b, map_pages(2, b));
    touch(b, 2 * k_page, 7);
    ASSERT_EQ(0, zv_cache_get(c1, b, 2 * k_page, k_rw, &r1));
    ASSERT_EQ(0, zv_cache_get(c2, b, 2 * k_page, k_rw, &r2));
    EXPECT_TRUE(be1.check(capi::to_region(r1), b, 2 * k_page));
    EXPECT_TRUE(be2.check(capi::to_region(r2), b, 2 * k_page));
    zv_cache_put(c1, r1);
    zv_cache_put(c2, r2);
    EXPECT_EQ(0, zv_cache_close(c1));
    EXPECT_EQ(0, zv_cache_close(c2));
    EXPECT_EQ(0u, be1.live() + be2.live());
    EXPECT_EQ(0u, be1.stale() + be2.stale());
    munmap(b, 2 * k_page);
}

// Caches opened, used and closed from several threads at once: the shared
// monitor is created and destroyed under the library's lock, never twice.
TEST(capi_params, caches_open_and_close_from_threads)
{
    capi_quiet      quiet;
    fake_backend    be;
    zv_cache_params p     = params_for("uffd");
    zv_cache_t     *probe = nullptr;
    if (capi::open_on_backend(&be, &p, &probe) != 0) {
        GTEST_SKIP() << "uffd monitor cannot run here";
    }
    ASSERT_EQ(0, zv_cache_close(probe));
    const int             rounds = std::max(2, static_cast<int>(20 * test_scale()));
    std::atomic<int>      failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                zv_cache_t *c = nullptr;
                char       *b = map_pages(2);
                if ((b == nullptr) || (capi::open_on_backend(&be, &p, &c) != 0)) {
                    ++failures;
                    continue;
                }
                touch(b, 2 * k_page);
                zv_region_t *r = nullptr;
                if (zv_cache_get(c, b, 2 * k_page, k_rw, &r) == 0) {
                    failures += !be.check(capi::to_region(r), b, 2 * k_page);
                    zv_cache_put(c, r);
                } else {
                    ++failures;
                }
                // Unmapped while this thread's cache holds the monitor: a
                // munmap of watched memory waits for the monitor to read the
                // event, and under valgrind (whose big lock a thread asleep in
                // munmap keeps) nothing else runs meanwhile, so it must never
                // wait on a monitor that another thread is destroying.
                munmap(b, 2 * k_page);
                failures += (zv_cache_close(c) != 0);
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    EXPECT_EQ(0, failures.load());
    EXPECT_EQ(0u, be.live());
    EXPECT_EQ(0u, be.stale());
}

TEST(capi_params, log_level_knob)
{
    fake_backend    be;
    zv_cache_t     *c = nullptr;
    zv_cache_params p = params_for("bogus");
    EXPECT_FALSE(capi::set_log_level("loud"));
    EXPECT_TRUE(capi::set_log_level("error"));
    {
        expect_log_problems guard;
        EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
        EXPECT_EQ(1u, guard.expected().size()) << "ZVERBS_LOG_LEVEL=error logs the error";
    }
    EXPECT_TRUE(capi::set_log_level("none"));
    {
        expect_log_problems guard;
        EXPECT_EQ(-EINVAL, capi::open_on_backend(&be, &p, &c));
        EXPECT_TRUE(guard.expected().empty()) << "quiet by default";
    }
    zv::g_log_cap.store(UCS_LOG_LEVEL_LAST);
}

} // namespace
} // namespace zv::test
