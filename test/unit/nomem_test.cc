// SPDX-License-Identifier: BSD-3-Clause
// Out of memory: an entry point whose allocation fails returns a status, and
// nothing throws into its C caller. This test binary replaces operator new so
// that the Nth allocation a thread makes after arm() fails, and sweeps N.
#include "capi/zverbs_internal.h"
#include "fake_env.h"
#include "monitor/monitor.h"
#include "util/log.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <new>
#include <string>

namespace {

// Allocations this thread may still make before one fails; < 0: none fails.
thread_local long t_fail_in = -1;
thread_local bool t_failed  = false;

void *allocate(size_t size, size_t align)
{
    if (t_fail_in >= 0) {
        if (t_fail_in-- == 0) {
            t_failed = true;
            return nullptr;
        }
    }
    if (size == 0) {
        size = 1;
    }
    if (align <= alignof(std::max_align_t)) {
        return std::malloc(size);
    }
    return std::aligned_alloc(align, (size + align - 1) / align * align);
}

void *allocate_or_throw(size_t size, size_t align)
{
    void *p = allocate(size, align);
    if (p == nullptr) {
        throw std::bad_alloc();
    }
    return p;
}

} // namespace

void *operator new(size_t size) { return allocate_or_throw(size, 0); }
void *operator new[](size_t size) { return allocate_or_throw(size, 0); }
void *operator new(size_t size, std::align_val_t a)
{
    return allocate_or_throw(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a)
{
    return allocate_or_throw(size, static_cast<size_t>(a));
}
void *operator new(size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0); }
void *operator new[](size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0); }
void *operator new(size_t size, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return allocate(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return allocate(size, static_cast<size_t>(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
    std::free(p);
}

namespace zv::test {
namespace {

// The Nth allocation of this thread from now fails (0: the next one).
class fail_nth {
public:
    explicit fail_nth(long n)
    {
        t_fail_in = n;
        t_failed  = false;
    }
    ~fail_nth() { t_fail_in = -1; }
    /// Whether the injected failure happened.
    static bool hit() { return t_failed; }
};

// Registrations without a device and without allocating: the sweep counts
// the library's allocations, not a test double's.
class counting_backend final : public rcache::backend {
public:
    ucs_status_t reg(void *, size_t, unsigned, bool, rcache::reg_handle *out) override
    {
        out->lkey = out->rkey = ++m_next;
        ++m_live;
        return UCS_OK;
    }
    void dereg(const rcache::reg_handle &) override { --m_live; }
    long live() const { return m_live; }

private:
    uint32_t m_next = 0;
    long     m_live = 0;
};

// One pass over the C API: open a cache, register and release a buffer,
// close. Each call gives a status; an exception leaving one is the failure
// this test is about.
struct pass_result {
    std::string threw; // the call an exception left, or empty
    bool        done = false;
};

pass_result capi_pass(const char *monitor, char *buf, long fail_at)
{
    pass_result      res;
    counting_backend be;
    zv_cache_params  p;
    zv_cache_params_init(&p);
    p.monitor     = monitor;
    p.max_regions = 64;
    p.max_size    = size_t(1) << 24;
    zv_cache_t *cache = nullptr;
    {
        fail_nth f(fail_at);
        int      rc = 0;
        try {
            rc = capi::open_on_backend(&be, &p, &cache);
        } catch (...) {
            res.threw = "open_on_backend";
            return res;
        }
        if (rc != 0) {
            EXPECT_EQ(-ENOMEM, rc) << monitor << ", allocation " << fail_at << ": "
                                   << zv_strerror(rc);
            EXPECT_EQ(0, be.live());
            return res;
        }
        zv_region_t *r = nullptr;
        try {
            rc = zv_cache_get(cache, buf, fake_backend::k_page, IBV_ACCESS_LOCAL_WRITE, &r);
        } catch (...) {
            res.threw = "zv_cache_get";
        }
        if (res.threw.empty() && (rc == 0)) {
            zv_cache_put(cache, r);
        } else if (res.threw.empty()) {
            EXPECT_EQ(-ENOMEM, rc) << monitor << ", allocation " << fail_at;
        }
        res.done = !fail_nth::hit();
    }
    EXPECT_EQ(0, zv_cache_close(cache));
    EXPECT_EQ(0, be.live()) << monitor << ", allocation " << fail_at << ": leaked";
    return res;
}

class nomem_capi : public testing::TestWithParam<const char *> {
};

// Every allocation in turn fails, until a pass makes none fail.
TEST_P(nomem_capi, every_allocation_failing_gives_a_status)
{
    capi::set_log_level(nullptr); // the library's default: it logs nothing
    char *buf = map_pages(1);
    ASSERT_NE(nullptr, buf);
    touch(buf, fake_backend::k_page);
    long n = 0;
    for (; n < 10000; ++n) {
        const pass_result res = capi_pass(GetParam(), buf, n);
        ASSERT_EQ("", res.threw) << GetParam() << ": allocation " << n
                                 << " failed, and std::bad_alloc left " << res.threw;
        if (res.done) {
            break;
        }
    }
    EXPECT_LT(n, 10000) << "the sweep did not end";
    munmap(buf, fake_backend::k_page);
    zv::g_log_cap.store(UCS_LOG_LEVEL_LAST);
}

INSTANTIATE_TEST_SUITE_P(monitors, nomem_capi, testing::Values("uffd", "ucm", "none"),
                         [](const testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param);
                         });

// The factory behind the md's and the C API's monitors.
TEST(nomem_monitor, create_gives_a_status)
{
    for (const auto kind : {monitor::monitor_kind::uffd, monitor::monitor_kind::ucm,
                            monitor::monitor_kind::none}) {
        monitor::settings cfg;
        cfg.kind = kind;
        monitor::monitor *mon = nullptr;
        ucs_status_t      status = UCS_OK;
        {
            fail_nth f(0);
            bool     threw = false;
            try {
                status = monitor::create(cfg, &mon);
            } catch (...) {
                threw = true;
            }
            ASSERT_FALSE(threw) << monitor::monitor_kind_name(kind)
                                << ": std::bad_alloc left monitor::create";
        }
        EXPECT_EQ(UCS_ERR_NO_MEMORY, status) << monitor::monitor_kind_name(kind);
        EXPECT_EQ(nullptr, mon);
    }
}

} // namespace
} // namespace zv::test
