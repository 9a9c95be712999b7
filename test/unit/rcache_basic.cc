// SPDX-License-Identifier: BSD-3-Clause
// Cache behaviour: hits, overlap policy, LRU eviction and limits, ODP, config, fork, cache off.
#include "fake_env.h"

#include "rcache/odp.h"

#include <infiniband/verbs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace zv::test {
namespace {

class rcache_basic : public cache_fixture {
protected:
    void SetUp() override {} // each test sets its own limits

    bool start(size_t max_regions = 4096, size_t max_size = size_t(4) << 30)
    {
        rcache::config cfg = default_config();
        cfg.max_regions    = max_regions;
        cfg.max_size       = max_size;
        setup_with(cfg);
        return !IsSkipped() && (m_cache != nullptr);
    }
};

// Policies of a cache that caches: the monitors other than none.
class rcache_policy : public rcache_basic {};

TEST_P(rcache_basic, hit_needs_no_registration)
{
    ASSERT_TRUE(start());
    char *p = map_pages(16);
    touch(p, 16 * k_page);
    const uint32_t k1 = use(p + 100, 3 * k_page);
    const uint64_t regs = m_be.regs();
    if (caching()) {
        EXPECT_EQ(k1, use(p + 100, 3 * k_page));
        EXPECT_EQ(k1, use(p + 200, 100)); // inside the same pages
        EXPECT_EQ(regs, m_be.regs());
    } else {
        EXPECT_NE(k1, use(p + 100, 3 * k_page));
        EXPECT_EQ(regs + 1, m_be.regs());
    }
    munmap(p, 16 * k_page);
}

TEST_P(rcache_policy, overlap_policy)
{
    ASSERT_TRUE(start());
    char *p = map_pages(32);
    touch(p, 32 * k_page);
    const uint32_t a = use(p, 4 * k_page);
    const uint32_t b = use(p + 2 * k_page, 4 * k_page);  // partial overlap: separate
    EXPECT_NE(a, b);
    EXPECT_EQ(2u, m_cache->stats().cached_regions);
    EXPECT_EQ(a, use(p + k_page, k_page));              // inside a only
    const uint32_t c = use(p, 8 * k_page);              // contains a and b: subsumes them
    EXPECT_EQ(1u, m_cache->stats().cached_regions);
    EXPECT_EQ(c, use(p + 3 * k_page, 2 * k_page));
    const uint32_t d = use(p + 8 * k_page, 4 * k_page); // adjacent: separate
    EXPECT_NE(c, d);
    EXPECT_EQ(2u, m_cache->stats().cached_regions);

    // More access than the covering region has: same range, union of access.
    rcache::region *r = get(p + k_page, k_page, k_access | IBV_ACCESS_REMOTE_ATOMIC);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p), r->start());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p + 8 * k_page), r->end());
    EXPECT_EQ(unsigned(k_access | IBV_ACCESS_REMOTE_ATOMIC), r->access());
    const uint32_t e = r->lkey();
    put(r);
    EXPECT_EQ(e, use(p, 2 * k_page)); // now serves plain requests too
    EXPECT_EQ(2u, m_cache->stats().cached_regions);
    munmap(p, 32 * k_page);
}

TEST_P(rcache_policy, eviction_is_lru)
{
    ASSERT_TRUE(start(3));
    char *p = map_pages(64);
    touch(p, 64 * k_page);
    char *a = p, *b = p + 8 * k_page, *c = p + 16 * k_page, *d = p + 24 * k_page;
    const uint32_t ka = use(a, k_page), kb = use(b, k_page), kc = use(c, k_page);
    EXPECT_EQ(ka, use(a, k_page)); // a is now more recent than b
    use(d, k_page);                // evicts the least recently used: b
    const auto s = m_cache->stats();
    EXPECT_EQ(1u, s.evictions);
    EXPECT_EQ(3u, s.cached_regions);
    EXPECT_EQ(ka, use(a, k_page));
    EXPECT_EQ(kc, use(c, k_page));
    EXPECT_NE(kb, use(b, k_page)); // registered again
    EXPECT_LE(m_be.live(), 3u);
    munmap(p, 64 * k_page);
}

TEST_P(rcache_policy, size_limit_and_oversized)
{
    ASSERT_TRUE(start(4096, 8 * k_page));
    char *p = map_pages(64);
    touch(p, 64 * k_page);
    use(p, 4 * k_page);
    use(p + 8 * k_page, 4 * k_page);
    EXPECT_EQ(8 * k_page, m_cache->stats().cached_bytes);
    use(p + 16 * k_page, 4 * k_page); // evicts the first
    EXPECT_EQ(8 * k_page, m_cache->stats().cached_bytes);
    EXPECT_EQ(1u, m_cache->stats().evictions);

    const size_t live = m_be.live();
    rcache::region *big = get(p + 32 * k_page, 16 * k_page); // larger than max_size
    ASSERT_NE(nullptr, big);
    EXPECT_EQ(1u, m_cache->stats().uncached);
    put(big);
    EXPECT_EQ(live, m_be.live()) << "an uncached region is released at put()";
    munmap(p, 64 * k_page);
}

TEST_P(rcache_basic, all_busy_registers_uncached)
{
    ASSERT_TRUE(start(2));
    char *p = map_pages(16);
    touch(p, 16 * k_page);
    rcache::region *a = get(p, k_page);
    rcache::region *b = get(p + 4 * k_page, k_page);
    const size_t live = m_be.live();
    rcache::region *c = get(p + 8 * k_page, k_page); // nothing idle to evict
    ASSERT_NE(nullptr, c);
    EXPECT_EQ(live + 1, m_be.live());
    put(c);
    EXPECT_EQ(live, m_be.live());
    put(a);
    put(b);
    munmap(p, 16 * k_page);
}

// The device or RLIMIT_MEMLOCK is full (ENOMEM) while idle cached
// registrations hold it: the cache gives those back and registers again;
// busy regions stay; with nothing idle left the error reaches the caller,
// and the cache keeps working once room is back.
TEST_P(rcache_policy, registration_failure_evicts_idle_and_retries)
{
    ASSERT_TRUE(start(4096));
    char *p = map_pages(32);
    touch(p, 32 * k_page);
    for (int i = 0; i < 4; ++i) {
        use(p + i * 4 * k_page, k_page); // four idle cached regions
    }
    rcache::region *busy = get(p + 16 * k_page, k_page);
    ASSERT_NE(nullptr, busy);
    ASSERT_EQ(5u, m_be.live());
    m_be.fail_when_live(5); // no room for a sixth registration

    rcache::region *r = get(p + 20 * k_page, k_page);
    ASSERT_NE(nullptr, r) << "registration failed although idle regions held the room";
    EXPECT_EQ(1u, m_cache->stats().reg_retries);
    EXPECT_EQ(4u, m_cache->stats().evictions);
    EXPECT_EQ(2u, m_be.live()) << "the busy region and the new one";

    // Full again and nothing idle: the caller gets the device's error.
    m_be.fail_when_live(2);
    rcache::region *none = nullptr;
    EXPECT_EQ(UCS_ERR_NO_MEMORY, m_cache->get(p + 24 * k_page, k_page, k_access, &none));
    EXPECT_EQ(nullptr, none);
    EXPECT_EQ(1u, m_cache->stats().reg_retries) << "nothing idle: no eviction, no retry";

    m_be.fail_when_live(-1);
    put(r);
    put(busy);
    rcache::region *again = get(p + 24 * k_page, k_page);
    EXPECT_NE(nullptr, again);
    put(again);
    munmap(p, 32 * k_page);
}

TEST_P(rcache_basic, auto_limits)
{
    rcache::config cfg = default_config();
    cfg.max_regions    = rcache::k_units_auto;
    cfg.max_size       = rcache::k_units_auto;
    setup_with(cfg);
    if (IsSkipped()) {
        return;
    }
    const auto s = m_cache->stats();
    EXPECT_EQ(16384u, s.max_regions);
    const size_t cpus = static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN));
    const size_t phys = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * k_page;
    EXPECT_LE(s.max_size, phys / (2 * cpus));
    EXPECT_GT(s.max_size, 0u);
    EXPECT_EQ(32u, rcache::resolve_limits(cfg, 32 * cpus).max_regions) << "max_mr / cpus";
}

TEST_P(rcache_basic, unregistrable_memory_fails_cleanly)
{
    ASSERT_TRUE(start());
    // A mapping without access, and an address range nothing can map (below
    // vm.mmap_min_addr). Not a range just unmapped: another thread may map
    // it again at once (seen once under TSAN).
    char *p = map_pages(4);
    ASSERT_NE(nullptr, p);
    ASSERT_EQ(0, mprotect(p, 4 * k_page, PROT_NONE));
    rcache::region *r = nullptr;
    EXPECT_NE(UCS_OK, m_cache->get(p, 4 * k_page, k_access, &r));
    EXPECT_NE(UCS_OK, m_cache->get(reinterpret_cast<void *>(k_page), 4 * k_page, k_access, &r));
    EXPECT_EQ(0u, m_be.live());
    munmap(p, 4 * k_page);
}

TEST_P(rcache_basic, odp_bypasses_the_cache)
{
    m_be.set_odp(k_access, true);
    ASSERT_TRUE(start());
    char *p = map_pages(8);
    touch(p, 8 * k_page);
    for (int i = 0; i < 5; ++i) {
        rcache::region *r = get(p + i * k_page, k_page, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(nullptr, r);
        EXPECT_EQ(0u, r->start());
        put(r);
    }
    EXPECT_EQ(1u, m_be.odp_regs()) << "one implicit registration serves everything";
    // An access bit the device cannot page on demand: the cache path.
    rcache::region *r = get(p, k_page, k_access | IBV_ACCESS_REMOTE_ATOMIC);
    ASSERT_NE(nullptr, r);
    EXPECT_NE(0u, r->start());
    put(r);
    EXPECT_EQ(1u, m_be.odp_regs());
    munmap(p, 8 * k_page);
}

TEST_P(rcache_basic, explicit_odp_is_per_use)
{
    m_be.set_odp(k_access, false);
    ASSERT_TRUE(start());
    char *p = map_pages(8);
    touch(p, 8 * k_page);
    use(p, k_page);
    use(p, k_page);
    EXPECT_EQ(2u, m_be.odp_regs());
    EXPECT_EQ(0u, m_be.live());
    munmap(p, 8 * k_page);
}

TEST_P(rcache_basic, fork_child_bypasses)
{
    ASSERT_TRUE(start());
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    rcache::region *parent_region = get(p, 4 * k_page);
    const uint32_t  parent_key    = parent_region->lkey();
    put(parent_region);

    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Child: only async-signal-safe behaviour is guaranteed, but the
        // cache's slow path must cope with being here.
        rcache::region *r = nullptr;
        const ucs_status_t st = m_cache->get(p, 4 * k_page, k_access, &r);
        int code = 0;
        if ((st == UCS_OK) && (r->lkey() == parent_key)) {
            code = 1; // handed out the parent's registration
        }
        if (caching() && (strcmp(m_cache->mode_name(), "fork-bypass") != 0)) {
            code = 2;
        }
        if (st == UCS_OK) {
            m_cache->put(r);
        }
        munmap(p, 4 * k_page); // must not block on the parent's monitor
        _exit(code);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "1: parent's region used, 2: no bypass";
    if (caching()) {
        EXPECT_EQ(parent_key, use(p, 4 * k_page)) << "the parent keeps its cache";
    }
    munmap(p, 4 * k_page);
}

// An application that forks after deregistering a buffer (UCX's
// test_md_fork): with libibverbs' fork support on (ibv_fork_init(), which
// UCX's ib md calls by default), a page still registered is MADV_DONTFORK
// and absent in the child, so the cache must not keep what was
// deregistered registered across a fork. A region held at the fork stays.
// posix_spawn() (glibc's system()) runs no fork handler: the cache keeps
// its regions there.
TEST_P(rcache_basic, fork_after_dereg_child_has_the_page)
{
    m_be.set_dontfork(true);
    ASSERT_TRUE(start());
    char *p = map_pages(4);
    touch(p, 4 * k_page, 42);
    rcache::region *held = get(p + 2 * k_page, k_page); // in use across the fork
    ASSERT_NE(nullptr, held);
    const uint32_t held_key = held->lkey();
    const uint32_t key      = use(p, k_page); // registered and deregistered
    const uint64_t regs     = m_be.regs();

    ASSERT_EQ(0, system("true"));
    if (caching()) {
        EXPECT_EQ(key, use(p, k_page)) << "system() emptied the cache";
        EXPECT_EQ(regs, m_be.regs());
    }

    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // SIGSEGV here if the page stayed registered (MADV_DONTFORK).
        _exit((static_cast<volatile char *>(p)[0] == 42) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    std::printf("[ info     ] child: %s %d; %llu registrations live after the fork\n",
                WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                static_cast<unsigned long long>(m_be.live()));
    EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status)
                                   << " touching a deregistered buffer";
    EXPECT_EQ(0, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    EXPECT_EQ(held_key, held->lkey()) << "the region held at the fork";
    EXPECT_EQ(1u, m_be.live()) << "only the held region stays registered";
    put(held);
    use(p, k_page); // registered again on its next use
    munmap(p, 4 * k_page);
}

class rcache_detector : public rcache_basic {};

TEST_P(rcache_detector, stale_detector_works)
{
    // The detector every test relies on: with ucm, a raw munmap goes unseen
    // and the fake must catch the resulting stale hit.
    ASSERT_TRUE(start());
    if (!m_be.can_detect()) {
        GTEST_SKIP() << "page frames are not readable (not root): stale hits undetectable";
    }
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    use(p, 4 * k_page);
    syscall(SYS_munmap, p, 4 * k_page);
    ASSERT_EQ(p, reinterpret_cast<char *>(syscall(SYS_mmap, p, 4 * k_page,
                                                  PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)));
    touch(p, 4 * k_page, 2);
    rcache::region *r = nullptr;
    ASSERT_EQ(UCS_OK, m_cache->get(p, 4 * k_page, k_access, &r));
    EXPECT_FALSE(m_be.check(r, p, 4 * k_page)) << "the fake missed a stale hit";
    m_cache->put(r);
    m_cache->flush();
    m_be.reset_stale();
    munmap(p, 4 * k_page);
}

INSTANTIATE_TEST_SUITE_P(monitors, rcache_basic, testing::ValuesIn(k_all_monitors), param_name);
INSTANTIATE_TEST_SUITE_P(monitors, rcache_policy, testing::ValuesIn(k_caching_monitors),
                         param_name);
INSTANTIATE_TEST_SUITE_P(monitors, rcache_detector, testing::Values(k_all_monitors[2]),
                         param_name);

TEST(rcache_config, parse_monitor_kind)
{
    rcache::monitor_kind k = rcache::monitor_kind::none;
    EXPECT_EQ(UCS_OK, rcache::parse_monitor_kind("UFFD", &k));
    EXPECT_EQ(rcache::monitor_kind::uffd, k);
    EXPECT_EQ(UCS_OK, rcache::parse_monitor_kind("auto", &k));
    EXPECT_EQ(rcache::monitor_kind::automatic, k);
    EXPECT_EQ(UCS_OK, rcache::parse_monitor_kind("none", &k));
    EXPECT_EQ(UCS_OK, rcache::parse_monitor_kind("ucm", &k));
    EXPECT_EQ(rcache::monitor_kind::ucm, k);
    {
        expect_log_problems guard;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, rcache::parse_monitor_kind("kernel", &k));
        ASSERT_EQ(1u, guard.expected().size());
        EXPECT_NE(std::string::npos,
                  guard.expected()[0].find("expected one of: none, uffd, ucm, auto"));
    }
    EXPECT_EQ(rcache::monitor_kind::ucm, k) << "output untouched on error";
    for (int i = 0; rcache::k_monitor_kind_names[i] != nullptr; ++i) {
        EXPECT_EQ(UCS_OK, rcache::parse_monitor_kind(rcache::k_monitor_kind_names[i], &k));
        EXPECT_STREQ(rcache::k_monitor_kind_names[i], rcache::monitor_kind_name(k));
    }
}

TEST(rcache_config, auto_monitor_choice_is_named)
{
    rcache::config cfg;
    ASSERT_EQ(UCS_OK, monitor::global_init(cfg.monitor_settings()));
    const std::string name = monitor::active_name();
    monitor::monitor *probe = nullptr;
    rcache::config    ucfg;
    ucfg.monitor = rcache::monitor_kind::uffd;
    bool uffd_works;
    {
        expect_log_problems guard;
        uffd_works = (monitor::create(ucfg.monitor_settings(), &probe) == UCS_OK);
    }
    monitor::destroy(probe);
    EXPECT_EQ(uffd_works ? "uffd" : "ucm", name) << "auto prefers the kernel notifier";
    monitor::global_cleanup();
    EXPECT_STREQ("none", monitor::active_name());
}

TEST(rcache_odp, decision)
{
    using rcache::decide_odp;
    rcache::odp_caps none;
    EXPECT_FALSE(decide_odp(none, IBV_ACCESS_LOCAL_WRITE, rcache::k_odp_rc).use);

    rcache::odp_caps rc_only;
    rc_only.general_caps = IBV_ODP_SUPPORT;
    rc_only.rc_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_SRQ_RECV;
    const unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    EXPECT_TRUE(decide_odp(rc_only, rw, rcache::k_odp_rc).use);
    EXPECT_FALSE(decide_odp(rc_only, rw, rcache::k_odp_rc).implicit);
    EXPECT_FALSE(decide_odp(rc_only, rw | IBV_ACCESS_REMOTE_ATOMIC, rcache::k_odp_rc).use);
    EXPECT_FALSE(decide_odp(rc_only, rw, rcache::k_odp_rc | rcache::k_odp_ud).use)
        << "the MR may be used on ud, which pages nothing on demand";
    EXPECT_FALSE(decide_odp(rc_only, rw | IBV_ACCESS_MW_BIND, rcache::k_odp_rc).use)
        << "unknown access bits are never decided in favour of ODP";

    rcache::odp_caps all = rc_only;
    all.general_caps |= IBV_ODP_SUPPORT_IMPLICIT;
    all.rc_caps |= IBV_ODP_SUPPORT_ATOMIC;
    all.uc_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
    all.ud_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
    const unsigned tl = rcache::k_odp_rc | rcache::k_odp_uc | rcache::k_odp_ud;
    EXPECT_TRUE(decide_odp(all, rw | IBV_ACCESS_REMOTE_ATOMIC, tl).use);
    EXPECT_TRUE(decide_odp(all, rw, tl).implicit);
    EXPECT_EQ(unsigned(rw | IBV_ACCESS_REMOTE_ATOMIC), rcache::odp_access_mask(all, tl));
    EXPECT_EQ(rw, rcache::odp_access_mask(rc_only, rcache::k_odp_rc));

    rcache::odp_caps no_recv = all;
    no_recv.ud_caps = IBV_ODP_SUPPORT_SEND; // send-only on ud
    EXPECT_TRUE(decide_odp(no_recv, IBV_ACCESS_REMOTE_READ, tl).use);
    EXPECT_FALSE(decide_odp(no_recv, IBV_ACCESS_LOCAL_WRITE, tl).use);
    EXPECT_EQ(unsigned(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                       IBV_ACCESS_REMOTE_ATOMIC),
              rcache::odp_access_mask(no_recv, tl));
}

} // namespace
} // namespace zv::test
