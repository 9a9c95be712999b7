// SPDX-License-Identifier: BSD-3-Clause
// Out of memory: an entry point whose allocation fails returns a status, and
// nothing throws into its C caller. This test binary replaces operator new so
// that the Nth allocation a thread makes after arm() fails, and sweeps N.
#include "capi/zverbs_internal.h"
#include "fake_env.h"
#include "log_guard.h"
#include "monitor/monitor.h"
#include "util/log.h"
#include "verbs/async.h"

#include "alloc_hook.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <string>

namespace zv::test {
namespace {

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

// The device events' fan-out (verbs/async.h): add(), on an interface's
// open, says when it cannot allocate the listener's queue; deliver(), in
// UCX's async thread, allocates nothing within that queue, and beyond it,
// out of memory, drops an event but keeps a fatal one for the listener.
TEST(nomem_async, add_gives_a_status_and_deliver_allocates_nothing)
{
    using kind = verbs::async_event::kind;
    verbs::async_dispatcher d;
    const auto notify = [](void *) { return 1; };
    int id            = -1;
    long n            = 0;
    for (; n < 100; ++n) {
        fail_nth f(n);
        id = d.add(notify, nullptr);
        if (!fail_nth::hit()) {
            break;
        }
        EXPECT_EQ(-1, id) << "allocation " << n << " failed, and add() gave an id";
        EXPECT_EQ(0u, d.listeners()) << "allocation " << n;
    }
    EXPECT_GT(n, 0) << "add() allocated nothing: the sweep showed nothing";
    ASSERT_GE(id, 0);

    verbs::async_event down;
    down.what = kind::port_down;
    down.type = IBV_EVENT_PORT_ERR;
    verbs::async_event fatal;
    fatal.what = kind::device_fatal;
    fatal.type = IBV_EVENT_DEVICE_FATAL;
    {
        fail_nth f(0);
        for (size_t i = 0; i < verbs::async_dispatcher::batch_len; ++i) {
            d.deliver(down);
        }
        EXPECT_FALSE(fail_nth::hit()) << "deliver() allocated within the listener's queue";
    }
    {
        expect_log_problems logs;
        {
            fail_nth f(0);
            d.deliver(down); // (its queue cannot grow: dropped)
            EXPECT_TRUE(fail_nth::hit());
        }
        {
            fail_nth f(0);
            d.deliver(fatal);
            EXPECT_TRUE(fail_nth::hit());
        }
        EXPECT_TRUE(logged_only(logs, "device events dropped")) << logs.text();
    }
    EXPECT_EQ(2u, d.dropped());
    EXPECT_TRUE(d.device_lost());
    verbs::async_event batch[verbs::async_dispatcher::batch_len];
    ASSERT_EQ(verbs::async_dispatcher::batch_len, d.take(id, batch));
    EXPECT_EQ(kind::port_down, batch[0].what);
    EXPECT_EQ(kind::device_fatal, batch[verbs::async_dispatcher::batch_len - 1].what)
            << "the fatal event took the last place";
    EXPECT_EQ(0u, d.take(id, batch));
    d.remove(id);
}

} // namespace
} // namespace zv::test
