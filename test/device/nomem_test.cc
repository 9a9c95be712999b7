// SPDX-License-Identifier: BSD-3-Clause
// Out of memory in an interface's open and an endpoint's creation: each
// allocation of the calling thread fails in turn (test/unit/alloc_hook.h,
// compiled into zv_device), and each time a status comes back (nothing
// throws into UCT's C code), nothing the failed call made is left (the
// kernel's count of QPs, CQs and SRQs, the event files), and the next call
// works.
#include "alloc_hook.h"
#include "kernel_objects.h"
#include "log_guard.h"
#include "tl_fixture.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace zv::test {

namespace {

/// What the process holds of the device: compared before and after.
struct verbs_held {
    int qps = 0, cqs = 0, srqs = 0, channels = 0;

    bool operator==(const verbs_held &o) const
    {
        return (qps == o.qps) && (cqs == o.cqs) && (srqs == o.srqs) && (channels == o.channels);
    }
    std::string str() const
    {
        return std::to_string(qps) + " QPs, " + std::to_string(cqs) + " CQs, " +
               std::to_string(srqs) + " SRQs, " + std::to_string(channels) + " event files";
    }
};

verbs_held verbs_now()
{
    // (srq: -1 where the tool lists none at all, ours or another process's)
    return {kernel_objects("qp"), kernel_objects("cq"), std::max(0, kernel_objects("srq")),
            event_files()};
}

/// Allocations a sweep tries at most: one that does not end is a failure.
constexpr long max_allocations = 3000;

class nomem : public tl_test {};

} // namespace

TEST_P(nomem, iface_open_gives_a_status_and_leaves_nothing)
{
    const verbs_held before = verbs_now();
    ASSERT_GE(before.qps, 0) << "`rdma resource show qp` does not run here";
    // Small queues: an open per allocation.
    const std::vector<std::pair<const char *, const char *>> small = {{"RX_QUEUE_LEN", "128"}};
    unsigned failed = 0, absorbed = 0;
    long n          = 0;
    for (; n < max_allocations; ++n) {
        uct_side s;
        ucs_status_t status = UCS_OK;
        bool threw = false, hit = false;
        {
            expect_log_problems logs; // (running out of memory is logged)
            std::optional<fail_nth> f;
            try {
                // Armed in 'more', just before uct_iface_open(): the
                // fixture's own allocations are not counted.
                status = try_open_side(s, small, [&](uct_iface_params_t &) { f.emplace(n); });
            } catch (...) {
                threw = true;
            }
            hit = fail_nth::hit();
            f.reset();
        }
        ASSERT_FALSE(threw) << tl_name() << ": allocation " << n
                            << " failed, and an exception left uct_iface_open()";
        if (status == UCS_OK) {
            close_side(s);
            if (!hit) {
                break; // the next open, with memory enough, works
            }
            ++absorbed; // (a cache that does without)
            continue;
        }
        ++failed;
        EXPECT_TRUE(hit) << tl_name() << ": allocation " << n << ": "
                         << ucs_status_string(status) << " without running out of memory";
    }
    EXPECT_LT(n, max_allocations) << "the sweep did not end";
    EXPECT_GT(failed, 0u) << "no allocation failed the open: the sweep showed nothing";
    const verbs_held after = verbs_now();
    EXPECT_TRUE(after == before) << "before: " << before.str() << "; after: " << after.str();
    std::printf("%s: interface open made %ld allocations; each failing: %u opens failed, %u "
                "did without\n", tl_name(), n, failed, absorbed);
}

TEST_P(nomem, ep_create_gives_a_status_and_leaves_nothing)
{
    // No async threads: no passive QP appears at the peer while counting.
    uct_side a, b;
    open_side(a, {}, UCS_ASYNC_MODE_POLL);
    open_side(b, {}, UCS_ASYNC_MODE_POLL);
    const verbs_held before = verbs_now();
    ASSERT_GE(before.qps, 0) << "`rdma resource show qp` does not run here";
    std::vector<uct_ep_h> eps; // created although an allocation failed
    unsigned failed = 0;
    uct_ep_h ep     = nullptr;
    long n          = 0;
    for (; n < max_allocations; ++n) {
        ucs_status_t status = UCS_OK;
        bool threw = false, hit = false;
        {
            expect_log_problems logs;
            fail_nth f(n);
            try {
                status = try_create_ep(a, b, &ep);
            } catch (...) {
                threw = true;
            }
            hit = fail_nth::hit();
        }
        ASSERT_FALSE(threw) << tl_name() << ": allocation " << n
                            << " failed, and an exception left uct_ep_create()";
        if (status == UCS_OK) {
            if (!hit) {
                break; // the next endpoint, with memory enough, works
            }
            eps.push_back(ep);
            continue;
        }
        ++failed;
        EXPECT_EQ(UCS_ERR_NO_MEMORY, status) << tl_name() << ": allocation " << n;
        EXPECT_TRUE(hit) << tl_name() << ": allocation " << n;
    }
    ASSERT_LT(n, max_allocations) << "the sweep did not end";
    EXPECT_GT(failed, 0u) << "no allocation failed the endpoint: the sweep showed nothing";
    // A QP for each endpoint made (ud_zv: the interface's), none for those
    // that failed.
    verbs_held expected = before;
    expected.qps += is("ud_zv") ? 0 : static_cast<int>(eps.size() + 1);
    const verbs_held after = verbs_now();
    EXPECT_TRUE(after == expected) << "expected: " << expected.str() << "; after: "
                                   << after.str();
    EXPECT_TRUE(run_until({&a, &b}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }))
            << "the endpoint made after the failures did not connect";
    std::printf("%s: endpoint creation made %ld allocations; each failing: %u failed, %zu "
                "did without\n", tl_name(), n, failed, eps.size());
    eps.push_back(ep);
    for (uct_ep_h e : eps) {
        uct_ep_destroy(e);
    }
}

ZV_INSTANTIATE(nomem, ZV_TLS_ALL);

} // namespace zv::test
