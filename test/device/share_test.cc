// SPDX-License-Identifier: BSD-3-Clause
// Connected queue pairs as the kernel counts them (`rdma resource show qp`):
//  - rc_zv and uc_zv: two interfaces that connect to each other, one after
//    the other or at the same time, hold one QP at each end, as UCX's
//    rc_verbs does; both directions carry data on it (AM, and RDMA READ
//    over rc_zv, RDMA WRITE over uc_zv);
//  - an end whose endpoint left keeps its QP while the peer's endpoint
//    still sends on it, and once neither uses it both QPs are gone;
//  - rc_zv and uc_zv: closing every endpoint leaves no connected QP.
#include "kernel_objects.h"
#include "test_util.h"
#include "uct_fixture.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <thread>
#include <vector>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 23;

/// This process's QPs of 'type' (RC, UC) in the kernel's resource tracking;
/// -1 when the tool cannot be run.
int kernel_qps(const char *type)
{
    return kernel_objects("qp", std::string("type ") + type + " ");
}

class qp_count : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    bool is_rc() const { return std::strcmp(GetParam(), "rc_zv") == 0; }
    const char *qp_type() const { return is_rc() ? "RC" : "UC"; }

    void SetUp() override
    {
        uct_test::SetUp();
        ASSERT_GE(kernel_qps(qp_type()), 0) << "`rdma resource show qp` does not run here";
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_a.iface, am_id, sink::handler, &m_at_a, 0));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, sink::handler, &m_at_b, 0));
    }

    using sink = am_values;

    /// Wait until ep can send (connected).
    void wait_connected(uct_ep_h ep)
    {
        ASSERT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }))
                << "endpoint did not connect";
    }

    /// An endpoint a->b, connected, then one b->a (which adopts its QP).
    std::pair<uct_ep_h, uct_ep_h> connect_both_ways()
    {
        uct_ep_h ab = create_ep(m_a, m_b);
        wait_connected(ab);
        uct_ep_h ba = create_ep(m_b, m_a);
        wait_connected(ba);
        return {ab, ba};
    }

    /// Send 'v' on ep and wait until 'to' got it.
    void deliver(uct_ep_h ep, uint64_t v, sink &to)
    {
        size_t before = to.got.size();
        ucs_status_t st;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(ep, am_id, v, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_OK, st);
        ASSERT_TRUE(wait_for([&] { return to.got.size() > before; })) << "not delivered";
        EXPECT_EQ(v, to.got.back());
    }

    /// Progress for 'seconds'.
    void progress_for(double seconds)
    {
        auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(seconds);
        wait_for([&] { return std::chrono::steady_clock::now() >= until; });
    }

    /// Progress until the kernel counts n QPs of the transport's type (the
    /// count costs a process: between two, progress as an application does).
    bool settles_at(int n, double seconds = 10.0)
    {
        auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(seconds);
        while (kernel_qps(qp_type()) != n) {
            if (std::chrono::steady_clock::now() >= until) {
                return false;
            }
            progress_for(0.05);
        }
        return true;
    }

    sink m_at_a, m_at_b;
};

class share : public qp_count {};

TEST_P(share, endpoints_both_ways_share_one_qp_each_end)
{
    uct_ep_h ab, ba;
    std::tie(ab, ba) = connect_both_ways();
    EXPECT_EQ(2, kernel_qps(qp_type())) << "rc_verbs holds one QP at each end";
    deliver(ab, 1, m_at_b);
    deliver(ba, 2, m_at_a);

    // One-sided data from the end that adopted the QP the peer connected:
    // an RDMA READ over rc_zv, an RDMA WRITE over uc_zv (the AM after it
    // is delivered only after the write, which comes first in its stream).
    region r = reg(4096, UCT_MD_MEM_ACCESS_ALL);
    std::vector<uint8_t> buf(is_rc() ? 4096 : 256);
    fill(r.addr, 4096, 7);
    fill(buf.data(), buf.size(), 9);
    counting_comp comp;
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = is_rc() ? uct_ep_get_bcopy(ba, unpack_cb, buf.data(), buf.size(),
                                        reinterpret_cast<uint64_t>(r.addr), r.rkey.rkey,
                                        &comp.super) :
                       uct_ep_put_short(ba, buf.data(), static_cast<unsigned>(buf.size()),
                                        reinterpret_cast<uint64_t>(r.addr), r.rkey.rkey);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
    if (st == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.done == 1; }));
        EXPECT_EQ(UCS_OK, comp.status);
    }
    if (!is_rc()) {
        deliver(ba, 5, m_at_a);
    }
    EXPECT_EQ(0, std::memcmp(buf.data(), r.addr, buf.size()));
    dereg(r);
    uct_ep_destroy(ba);
    uct_ep_destroy(ab);
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " QPs left";
}

TEST_P(share, crossing_connections_pair_into_one)
{
    // Both ends start connecting before either has progressed.
    uct_ep_h ab = create_ep(m_a, m_b);
    uct_ep_h ba = create_ep(m_b, m_a);
    wait_connected(ab);
    wait_connected(ba);
    EXPECT_EQ(2, kernel_qps(qp_type()));
    deliver(ab, 3, m_at_b);
    deliver(ba, 4, m_at_a);
    uct_ep_destroy(ab);
    uct_ep_destroy(ba);
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " QPs left";
}

TEST_P(share, an_end_that_left_keeps_its_qp_while_the_peer_sends)
{
    uct_ep_h ab, ba;
    std::tie(ab, ba) = connect_both_ways();
    uct_ep_destroy(ab);
    progress_for(0.5); // long enough for the close handshake to have run
    EXPECT_EQ(2, kernel_qps(qp_type()));
    for (uint64_t v = 10; v < 20; ++v) {
        deliver(ba, v, m_at_a);
    }
    // A new endpoint of a's cannot take back the QP it gave up: it gets
    // a connection of its own, and it works.
    uct_ep_h ab2 = create_ep(m_a, m_b);
    wait_connected(ab2);
    deliver(ab2, 30, m_at_b);
    EXPECT_EQ(4, kernel_qps(qp_type()));
    uct_ep_destroy(ba);
    EXPECT_TRUE(settles_at(2)) << kernel_qps(qp_type()) << " QPs, expected ab2's pair";
    deliver(ab2, 31, m_at_b);
    uct_ep_destroy(ab2);
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " QPs left";
}

TEST_P(share, more_endpoints_one_way_than_the_other)
{
    // Two lanes from a, one back from b: b's adopts one of the two.
    uct_ep_h ab1 = create_ep(m_a, m_b);
    uct_ep_h ab2 = create_ep(m_a, m_b);
    wait_connected(ab1);
    wait_connected(ab2);
    uct_ep_h ba = create_ep(m_b, m_a);
    wait_connected(ba);
    EXPECT_EQ(4, kernel_qps(qp_type()));
    deliver(ab1, 40, m_at_b);
    deliver(ab2, 41, m_at_b);
    deliver(ba, 42, m_at_a);
    uct_ep_destroy(ab1);
    uct_ep_destroy(ba);
    uct_ep_destroy(ab2);
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " QPs left";
}

TEST_P(share, an_endpoint_to_its_own_interface_connects)
{
    // UCP's endpoint to its own worker has an rc_zv lane (rma_bw). Its QP
    // is connected to itself, as rc_verbs': one QP per such endpoint (and
    // over uc_zv, its sends and their acks travel on that one QP).
    uct_ep_h aa = create_ep(m_a, m_a);
    wait_connected(aa);
    deliver(aa, 50, m_at_a);
    EXPECT_EQ(1, kernel_qps(qp_type()));
    uct_ep_h aa2 = create_ep(m_a, m_a);
    wait_connected(aa2);
    deliver(aa2, 51, m_at_a);
    EXPECT_EQ(2, kernel_qps(qp_type()));
    uct_ep_destroy(aa);
    uct_ep_destroy(aa2);
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " QPs left";
}

TEST_P(qp_count, closing_every_endpoint_leaves_no_connected_qp)
{
    std::vector<uct_ep_h> eps;
    for (int i = 0; i < 4; ++i) {
        eps.push_back(create_ep(m_a, m_b));
        eps.push_back(create_ep(m_b, m_a));
    }
    for (uct_ep_h ep : eps) {
        wait_connected(ep);
    }
    EXPECT_GT(kernel_qps(qp_type()), 0);
    for (size_t i = 0; i < eps.size(); ++i) {
        deliver(eps[i], 100 + i, (i % 2 == 0) ? m_at_b : m_at_a);
    }
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
    EXPECT_TRUE(settles_at(0)) << kernel_qps(qp_type()) << " " << qp_type()
                               << " QPs left";
}

class burst : public qp_count {
protected:
    void SetUp() override
    {
        qp_count::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        // A short CONN_TIMEOUT, shorter than the time the test spends
        // without progress after creating the endpoints; no async thread
        // (UCS_ASYNC_MODE_POLL), which would progress them meanwhile
        // (uc_zv's connection manager answers from it).
        for (uct_side *s : {&m_a, &m_b}) {
            close_side(*s);
            open_side(*s, {{"CONN_TIMEOUT", "2s"}}, UCS_ASYNC_MODE_POLL);
        }
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_a.iface, am_id, sink::handler, &m_at_a, 0));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, sink::handler, &m_at_b, 0));
    }
};

TEST_P(burst, many_endpoints_created_without_progress_all_connect)
{
    // As an application that creates an endpoint per peer, then computes
    // before it first progresses: every request is sent or queued at once
    // (more than the 32 in flight per peer), and each must be answered
    // within CONN_TIMEOUT of the progress that follows, not of its creation.
    constexpr unsigned n = 256;
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < n; ++i) {
        eps.push_back(create_ep(m_a, m_b));
        eps.push_back(create_ep(m_b, m_a));
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    ASSERT_TRUE(wait_for([&] {
        return std::all_of(eps.begin(), eps.end(), [](uct_ep_h ep) {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        });
    }, 60)) << "not every endpoint connected";
    EXPECT_EQ(0u, s_ep_errors) << "an endpoint failed: " << ucs_status_string(s_last_ep_error);
    for (size_t i = 0; i < eps.size(); ++i) {
        deliver(eps[i], 1000 + i, (i % 2 == 0) ? m_at_b : m_at_a);
    }
    EXPECT_EQ(static_cast<int>(2 * n), kernel_qps(qp_type())) << "one QP at each end per pair";
}

} // namespace

INSTANTIATE_TEST_SUITE_P(tl, burst, ::testing::Values("rc_zv", "uc_zv"),
                         tl_param_name());
INSTANTIATE_TEST_SUITE_P(tl, share, ::testing::Values("rc_zv", "uc_zv"),
                         tl_param_name());
INSTANTIATE_TEST_SUITE_P(tl, qp_count, ::testing::Values("rc_zv", "uc_zv"),
                         tl_param_name());

} // namespace zv::test
