// SPDX-License-Identifier: BSD-3-Clause
// Test environment for the cache and monitors: log capture, monitor parameters, memory helpers.
#ifndef ZV_TEST_FAKE_ENV_H_
#define ZV_TEST_FAKE_ENV_H_

#include "fake_backend.h"
#include "log_guard.h"
#include "monitor/monitor.h"
#include "rcache/cache.h"

#include <gtest/gtest.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

namespace zv::test {

struct monitor_param {
    const char          *name;
    rcache::monitor_kind kind;
    rcache::uffd_mode    uffd;
};

// Without this gtest prints the struct's bytes, padding included, which
// memcheck rightly reports as uninitialised.
inline void PrintTo(const monitor_param &p, std::ostream *os) { *os << p.name; }

inline std::string param_name(const testing::TestParamInfo<monitor_param> &info)
{
    return info.param.name;
}

inline const monitor_param k_all_monitors[] = {
    {"uffd", rcache::monitor_kind::uffd, rcache::uffd_mode::automatic},
    {"uffd_missing", rcache::monitor_kind::uffd, rcache::uffd_mode::missing},
    {"ucm", rcache::monitor_kind::ucm, rcache::uffd_mode::automatic},
    {"none", rcache::monitor_kind::none, rcache::uffd_mode::automatic},
};

inline const monitor_param k_caching_monitors[] = {
    {"uffd", rcache::monitor_kind::uffd, rcache::uffd_mode::automatic},
    {"uffd_missing", rcache::monitor_kind::uffd, rcache::uffd_mode::missing},
    {"ucm", rcache::monitor_kind::ucm, rcache::uffd_mode::automatic},
};

// Scale of the long loops: 1 natively, smaller under valgrind; ZV_TEST_SCALE
// (a percentage) overrides.
inline double test_scale()
{
    if (const char *s = getenv("ZV_TEST_SCALE")) {
        return atof(s) / 100.0;
    }
    return RUNNING_ON_VALGRIND ? 0.01 : 1.0;
}

constexpr size_t k_page = 4096;

// Where map_pages() puts memory when no address is given: a 16 MiB area
// 64 GiB below where mmap(NULL) places mappings (top down), used round
// robin, one page between mappings. Tests unmap a range and map it again at
// the same address; a hole at the top-down frontier is where any other
// thread's next mmap(NULL) goes (the ASAN and TSAN runtimes map memory of
// their own at any time), and such holes were taken. A hole down here is
// never the highest gap that fits. The area is reused, so that memory the
// sanitizers keep per address (shadow) stays bounded.
constexpr size_t k_test_area = size_t(16) << 20;

inline void *test_area_next(size_t len)
{
    static std::atomic<uintptr_t> s_base{0};
    static std::atomic<uint64_t>  s_used{0};
    if (len + k_page > k_test_area) {
        return nullptr;
    }
    uintptr_t base = s_base.load();
    if (base == 0) {
        void *probe = mmap(nullptr, k_page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (probe == MAP_FAILED) {
            return nullptr;
        }
        munmap(probe, k_page);
        const uintptr_t want = (reinterpret_cast<uintptr_t>(probe) - (uintptr_t(64) << 30)) &
                               ~((uintptr_t(1) << 30) - 1);
        uintptr_t expected = 0;
        base = s_base.compare_exchange_strong(expected, want) ? want : expected;
    }
    size_t off = s_used.fetch_add(len + k_page) % k_test_area;
    if (off + len > k_test_area) {
        off = 0; // wrap; a collision just fails the mapping, and the caller moves on
    }
    return reinterpret_cast<void *>(base + off);
}

inline char *map_pages(size_t pages, void *at = nullptr, int extra = 0)
{
    const size_t len   = pages * k_page;
    const int    flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | extra;
    if (at == nullptr) {
        // A taken spot (or a tool that refuses the address: valgrind) falls
        // back to wherever the kernel puts it.
        for (int attempt = 0; attempt < 8; ++attempt) {
            void *hint = test_area_next(len);
            if (hint == nullptr) {
                break;
            }
            void *p = mmap(hint, len, PROT_READ | PROT_WRITE, flags, -1, 0);
            if (p != MAP_FAILED) {
                return static_cast<char *>(p);
            }
        }
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra,
                       -1, 0);
        return (p == MAP_FAILED) ? nullptr : static_cast<char *>(p);
    }
    void *p = mmap(at, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    return (p == MAP_FAILED) ? nullptr : static_cast<char *>(p);
}

// Writes every page so that it is present (and a replaced page gets a frame).
inline void touch(void *p, size_t len, char value = 1)
{
    for (size_t off = 0; off < len; off += k_page) {
        static_cast<volatile char *>(p)[off] = value;
    }
}

inline size_t rss_bytes()
{
    long  pages = 0, resident = 0;
    FILE *f     = fopen("/proc/self/statm", "r");
    if (f != nullptr) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return static_cast<size_t>(resident) * k_page;
}

inline size_t vma_count()
{
    size_t n = 0;
    FILE  *f = fopen("/proc/self/maps", "r");
    if (f != nullptr) {
        for (int c; (c = fgetc(f)) != EOF;) {
            n += (c == '\n');
        }
        fclose(f);
    }
    return n;
}

// Fixture: one monitor of the parameter's kind, one fake backend, one cache.
class cache_fixture : public testing::TestWithParam<monitor_param> {
protected:
    static constexpr unsigned k_access = 0x7; // LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ

    void SetUp() override { setup_with(default_config()); }

    rcache::config default_config() const
    {
        rcache::config cfg;
        cfg.monitor     = GetParam().kind;
        cfg.uffd        = GetParam().uffd;
        cfg.max_regions = 4096;
        cfg.max_size    = size_t(4) << 30;
        return cfg;
    }

    void setup_with(const rcache::config &cfg)
    {
        m_cfg = cfg;
        ucs_status_t status;
        std::string  why;
        {
            expect_log_problems guard; // an unusable monitor says why
            status = monitor::create(cfg.monitor_settings(), &m_mon);
            if (!guard.expected().empty()) {
                why = guard.expected().back();
            }
        }
        if (status != UCS_OK) {
            m_skip_reason = std::string(GetParam().name) + " monitor cannot run here: " + why;
            GTEST_SKIP() << m_skip_reason;
        }
        if (is_uffd()) {
            wait_monitor_running();
        }
        ASSERT_EQ(UCS_OK, rcache::cache::create(cfg, &m_be, m_mon, "test", &m_cache));
    }

    // Under ASAN and TSAN a new thread maps memory of its own when it first
    // runs, and the monitor's thread may first run long after create() (on
    // two busy cores), in the middle of a test that unmaps memory and maps
    // it again at the same address: it can take that address. A watched
    // page unmapped here returns only once the monitor has read the event,
    // so its thread is running when the test starts.
    void wait_monitor_running()
    {
        char *w = map_pages(1);
        ASSERT_NE(nullptr, w);
        touch(w, k_page);
        const auto start = reinterpret_cast<uintptr_t>(w);
        EXPECT_EQ(UCS_OK, m_mon->watch(start, start + k_page));
        munmap(w, k_page);
    }

    void TearDown() override
    {
        if (m_cache != nullptr) {
            rcache::cache::destroy(m_cache);
            m_cache = nullptr;
            EXPECT_EQ(0u, m_be.live()) << "registrations leaked";
        }
        if (m_mon != nullptr) {
            monitor::destroy(m_mon);
            m_mon = nullptr;
        }
        EXPECT_EQ(0u, m_be.stale()) << "stale hits";
    }

    bool caching() const { return GetParam().kind != rcache::monitor_kind::none; }
    bool is_uffd() const { return GetParam().kind == rcache::monitor_kind::uffd; }

    // get() that asserts success and that the result is not stale.
    rcache::region *get(void *p, size_t len, unsigned access = k_access)
    {
        rcache::region *r = nullptr;
        EXPECT_EQ(UCS_OK, m_cache->get(p, len, access, &r));
        if (r != nullptr) {
            EXPECT_TRUE(m_be.check(r, p, len)) << "stale hit at " << p;
        }
        return r;
    }

    void put(rcache::region *r)
    {
        if (r != nullptr) {
            m_cache->put(r);
        }
    }

    // get + put, returning the registration's key: unique per registration
    // (regions themselves are recycled, so their addresses are not).
    uint32_t use(void *p, size_t len)
    {
        rcache::region *r = get(p, len);
        const uint32_t key = (r != nullptr) ? r->lkey() : 0;
        put(r);
        return key;
    }

    rcache::config    m_cfg;
    fake_backend      m_be;
    monitor::monitor *m_mon   = nullptr;
    rcache::cache    *m_cache = nullptr;
    std::string       m_skip_reason;
};

} // namespace zv::test

#endif
