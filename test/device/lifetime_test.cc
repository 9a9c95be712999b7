// SPDX-License-Identifier: BSD-3-Clause
// Endpoint lifetimes and send-path limits, on every zv transport:
//  - a pending callback that destroys its own endpoint and another one, or
//    purges its own queue, inside progress: nothing runs on a destroyed
//    endpoint, a purged request is never dispatched, the interface goes on;
//  - a QP forced into the error state fails its endpoint, and only it;
//    ud_zv's interface QP in the error state is reset instead: nothing is
//    posted to it meanwhile, and what was sent before arrives afterwards;
//  - am_zcopy beyond the advertised limits is refused, not sent (it would
//    overrun the peer's receive buffer).
#include "test_util.h"
#include "uct_fixture.h"
#include "log_guard.h"

#include "rc/rc_ep.h"
#include "ud/ud_iface.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 17;

class lifetime : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    bool is(const char *tl) const { return std::strcmp(GetParam(), tl) == 0; }

    /// Fill the endpoint's send resources without progress: AMs until
    /// NO_RESOURCE (a full send queue or window).
    void fill(uct_ep_h ep)
    {
        uint64_t v = 0;
        unsigned n = 0;
        while (uct_ep_am_short(ep, am_id, v++, nullptr, 0) == UCS_OK) {
            ASSERT_LT(++n, 1000000u) << "send resources never ran out";
        }
    }

    /// The endpoint's own QP (rc_zv and uc_zv).
    ibv_qp *qp_of(uct_ep_h ep) const
    {
        if (is("rc_zv")) {
            return reinterpret_cast<rc::rc_ep *>(ep)->qp;
        }
        return reinterpret_cast<rd::rd_ep *>(ep)->qp;
    }
};

struct counter_sink {
    unsigned count = 0;
    static ucs_status_t handler(void *arg, void *, size_t, unsigned)
    {
        ++static_cast<counter_sink *>(arg)->count;
        return UCS_OK;
    }
};

/// A pending request whose callback runs 'action' once and reports OK.
struct action_req {
    uct_pending_req_t     super;
    std::function<void()> action;
    int                   calls = 0;
    static ucs_status_t cb(uct_pending_req_t *self)
    {
        auto *r = reinterpret_cast<action_req *>(self);
        if (r->calls++ == 0 && r->action) {
            r->action();
        }
        return UCS_OK;
    }
    action_req() { super.func = cb; }
};

struct purged_list {
    std::vector<uct_pending_req_t *> reqs;
    static void cb(uct_pending_req_t *req, void *arg)
    {
        static_cast<purged_list *>(arg)->reqs.push_back(req);
    }
};

/// Add 'r' to 'ep' (retrying BUSY by progressing nothing: the endpoint is
/// full, so BUSY means a bug).
void add_pending(uct_ep_h ep, action_req &r)
{
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &r.super, 0));
}

} // namespace

TEST_P(lifetime, pending_callback_destroys_its_endpoint_and_another_inside_progress)
{
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h e1 = create_ep(m_a, m_b), e2 = create_ep(m_a, m_b);
    ASSERT_TRUE(e1 && e2);
    ASSERT_TRUE(wait_for([&] {
        return (uct_ep_flush(e1, 0, nullptr) == UCS_OK) && (uct_ep_flush(e2, 0, nullptr) == UCS_OK);
    }));
    fill(e1);
    fill(e2);
    // e2's request first, then e1's, which destroys both; then one more on
    // each that must never run.
    action_req r2, r1, after1, after2;
    bool destroyed = false;
    r1.action = [&] {
        uct_ep_destroy(e2);
        uct_ep_destroy(e1);
        destroyed = true;
    };
    r2.action = [&] {};
    // Before e1's request runs, e2's queue may drain (a transport dispatches
    // an endpoint's requests while it has resources): what must never
    // happen is a request running on an endpoint already destroyed.
    int after_destroy = 0;
    after1.action = after2.action = [&] { after_destroy += destroyed ? 1 : 0; };
    add_pending(e2, r2);
    add_pending(e1, r1);
    add_pending(e1, after1);
    add_pending(e2, after2);
    ASSERT_TRUE(wait_for([&] { return destroyed; }, 60)) << "e1's request never dispatched";
    for (int i = 0; i < 2000; ++i) {
        progress();
    }
    EXPECT_EQ(0, after_destroy) << "a request of a destroyed endpoint was dispatched";
    EXPECT_EQ(0, after1.calls) << "e1's second request ran, though e1's first destroys it";
    EXPECT_LE(after2.calls, 1);
    EXPECT_LE(r2.calls, 1);
    // The interface goes on: a new endpoint connects and delivers.
    unsigned before = sink.count;
    uct_ep_h e3     = connect(m_a, m_b);
    ASSERT_NE(nullptr, e3);
    ASSERT_TRUE(wait_for([&] { return uct_ep_am_short(e3, am_id, 7, nullptr, 0) == UCS_OK; }));
    EXPECT_TRUE(wait_for([&] { return sink.count > before; }));
    EXPECT_EQ(0u, s_ep_errors);
}

TEST_P(lifetime, pending_callback_purges_its_own_queue)
{
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    fill(ep);
    purged_list purged;
    action_req first, second, third;
    first.action = [&] { uct_ep_pending_purge(ep, purged_list::cb, &purged); };
    add_pending(ep, first);
    add_pending(ep, second);
    add_pending(ep, third);
    ASSERT_TRUE(wait_for([&] { return first.calls > 0; }, 60));
    for (int i = 0; i < 2000; ++i) {
        progress();
    }
    ASSERT_EQ(2u, purged.reqs.size());
    EXPECT_EQ(&second.super, purged.reqs[0]);
    EXPECT_EQ(&third.super, purged.reqs[1]);
    EXPECT_EQ(0, second.calls) << "a purged request was dispatched";
    EXPECT_EQ(0, third.calls) << "a purged request was dispatched";
    EXPECT_EQ(1, first.calls);
}

/// rc_zv: one QP per endpoint, which cannot be reset under a live peer
/// connection (uc_zv's can: uc_qp below; ud_zv's endpoints share the
/// interface's).
class own_qp : public lifetime {
};

TEST_P(own_qp, qp_in_error_fails_its_endpoint_and_only_it)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h bad = connect(m_a, m_b), good = connect(m_a, m_b);
    ASSERT_TRUE(bad && good);
    ibv_qp_attr attr = {};
    attr.qp_state    = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(qp_of(bad), &attr, IBV_QP_STATE));
    // Work on the broken endpoint completes with an error, reported once.
    counting_comp c;
    std::vector<uint8_t> data(512, 0x3c);
    pack_arg pa{data.data(), data.size()};
    ASSERT_GE(uct_ep_am_bcopy(bad, am_id, pack_cb, &pa, 0), 0);
    ucs_status_t st = uct_ep_flush(bad, 0, &c.super);
    ASSERT_TRUE((st == UCS_INPROGRESS) || UCS_STATUS_IS_ERR(st)) << ucs_status_string(st);
    ASSERT_TRUE(wait_for([&] { return s_ep_errors > 0; }, 60)) << "the endpoint never failed";
    if (st == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return c.done == 1; }));
        EXPECT_NE(UCS_OK, c.status);
    }
    EXPECT_EQ(1u, s_ep_errors);
    EXPECT_NE(UCS_OK, s_last_ep_error);
    // The other endpoint is untouched.
    unsigned before = sink.count;
    for (int i = 0; i < 100; ++i) {
        ASSERT_TRUE(wait_for([&] { return uct_ep_am_bcopy(good, am_id, pack_cb, &pa, 0) >= 0; }));
    }
    EXPECT_TRUE(wait_for([&] { return sink.count == before + 100; })) << sink.count - before;
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(good, 0, nullptr) == UCS_OK; }));
    EXPECT_EQ(1u, s_ep_errors);
    EXPECT_TRUE(logged_only(logs, "with error"));
}

/// uc_zv: one QP per connection, reset in place when it enters the error
/// state: its endpoint goes on, and the others are untouched.
class uc_qp : public lifetime {
protected:
    /// 'n' bcopy messages over ep, flushed; each delivered once.
    void send_and_flush(uct_ep_h ep, counter_sink &sink, unsigned n)
    {
        std::vector<uint8_t> data(512, 0x3c);
        pack_arg pa{data.data(), data.size()};
        const unsigned before = sink.count;
        for (unsigned i = 0; i < n; ++i) {
            ASSERT_TRUE(wait_for([&] { return uct_ep_am_bcopy(ep, am_id, pack_cb, &pa, 0) >= 0; }));
        }
        EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
        EXPECT_TRUE(wait_for([&] { return sink.count == before + n; })) << sink.count - before;
    }
};

TEST_P(uc_qp, qp_in_error_is_reset_and_its_endpoint_goes_on)
{
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h bad = connect(m_a, m_b), good = connect(m_a, m_b);
    ASSERT_TRUE(bad && good);
    send_and_flush(bad, sink, 1); // (connected)
    const uint64_t resets = rd::to_rd(m_a.iface)->qp_resets;
    ibv_qp_attr attr = {};
    attr.qp_state    = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(qp_of(bad), &attr, IBV_QP_STATE));
    send_and_flush(bad, sink, 100);
    EXPECT_GT(rd::to_rd(m_a.iface)->qp_resets, resets) << "the QP was not reset";
    send_and_flush(good, sink, 100);
    EXPECT_EQ(0u, s_ep_errors);
}

TEST_P(uc_qp, qp_fatal_event_resets_that_qp_only)
{
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h bad = connect(m_a, m_b), good = connect(m_a, m_b);
    ASSERT_TRUE(bad && good);
    send_and_flush(bad, sink, 1);
    const uint64_t resets = rd::to_rd(m_a.iface)->qp_resets;
    ibv_qp_attr attr = {};
    attr.qp_state    = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(qp_of(bad), &attr, IBV_QP_STATE));
    verbs::async_event ev;
    ev.what   = verbs::async_event::kind::qp_fatal;
    ev.type   = IBV_EVENT_QP_FATAL;
    ev.qp_num = qp_of(bad)->qp_num;
    md::from_uct(m_md)->events.deliver(ev);
    ASSERT_TRUE(wait_for([&] { return rd::to_rd(m_a.iface)->qp_resets > resets; }, 10))
            << "the QP was not reset";
    send_and_flush(bad, sink, 10);
    send_and_flush(good, sink, 10);
    EXPECT_EQ(0u, s_ep_errors);
}

/// ud_zv: one QP per interface, reset in place when it enters the error state.
class ud_iface_qp : public lifetime {
};

TEST_P(ud_iface_qp, qp_in_error_takes_no_work_until_reset_then_delivers_everything)
{
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_TRUE(ep);
    ud::ud_iface *a = ud::to_ud(m_a.iface);
    ASSERT_TRUE(wait_for([&] { return uct_ep_am_short(ep, am_id, 1, nullptr, 0) == UCS_OK; }));
    ASSERT_TRUE(wait_for([&] { return sink.count == 1; }));
    const uint64_t resets = a->super.qp_resets;
    // As a failed send leaves it (Soft-RoCE while the link is down).
    ibv_qp_attr attr = {};
    attr.qp_state    = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(a->qp.get(), &attr, IBV_QP_STATE));
    // Sent into the broken QP: lost there, resent once it is reset.
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 2, nullptr, 0));
    // Its receive queue flushes in batches: broken for many progress calls.
    ASSERT_TRUE(wait_for([&] { return a->qp_broken; })) << "the error state was not seen";
    // Nothing may be posted to a QP in the error state: work posted there
    // may never complete, and the reset waits for all of it.
    const unsigned posted = a->super.tx_outstanding;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_ep_am_short(ep, am_id, 3, nullptr, 0));
    EXPECT_EQ(posted, a->super.tx_outstanding) << "a send was posted to the broken QP";
    ASSERT_TRUE(wait_for([&] { return a->super.qp_resets > resets; })) << "the QP was never reset";
    for (uint64_t v = 4; v < 104; ++v) {
        ASSERT_TRUE(wait_for([&] { return uct_ep_am_short(ep, am_id, v, nullptr, 0) == UCS_OK; }));
    }
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    EXPECT_TRUE(wait_for([&] { return sink.count >= 102; })) << sink.count;
    EXPECT_EQ(102u, sink.count) << "1 before, 1 into the broken QP, 100 after: each once";
    EXPECT_EQ(0u, s_ep_errors);
}

TEST_P(lifetime, am_zcopy_beyond_the_advertised_limits_is_refused)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const uct_iface_attr_t &a = m_a.attr;
    ASSERT_TRUE(a.cap.flags & UCT_IFACE_FLAG_AM_ZCOPY);
    region r = reg(a.cap.am.max_zcopy + 4096, UCT_MD_MEM_ACCESS_LOCAL_READ);
    std::vector<char> hdr(a.cap.am.max_hdr + 1, 1);
    // Header plus payload one byte over max_zcopy; header over max_hdr.
    uct_iov_t over = {r.addr, a.cap.am.max_zcopy - 7, r.memh, 0, 1};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ep_am_zcopy(ep, am_id, hdr.data(), 8, &over, 1, 0, nullptr));
    uct_iov_t small = {r.addr, 64, r.memh, 0, 1};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ep_am_zcopy(ep, am_id, hdr.data(), a.cap.am.max_hdr + 1, &small, 1, 0, nullptr));
    std::vector<uct_iov_t> many(a.cap.am.max_iov + 1, small);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ep_am_zcopy(ep, am_id, hdr.data(), 8, many.data(), many.size(), 0, nullptr));
    // Exactly at the limit: sent and delivered, the connection intact.
    uct_iov_t full = {r.addr, a.cap.am.max_zcopy - 8, r.memh, 0, 1};
    counting_comp c;
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_zcopy(ep, am_id, hdr.data(), 8, &full, 1, 0, &c.super);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
    EXPECT_TRUE(wait_for([&] { return sink.count == 1; }));
    if (st == UCS_INPROGRESS) {
        EXPECT_TRUE(wait_for([&] { return c.done == 1; }));
        EXPECT_EQ(UCS_OK, c.status);
    }
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    EXPECT_EQ(0u, s_ep_errors);
    dereg(r);
    EXPECT_TRUE(logged_only(logs, "am_zcopy"));
}

// The device's events as the interfaces get them (from the md's reader in
// UCX's async thread, through the worker's progress): a QP-fatal event
// fails that endpoint only; a device-fatal event fails every endpoint of
// every interface on the device, and new endpoints are refused.
TEST_P(own_qp, qp_fatal_event_fails_that_endpoint_only)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h bad = connect(m_a, m_b), good = connect(m_a, m_b);
    ASSERT_TRUE(bad && good);
    verbs::async_event ev;
    ev.what   = verbs::async_event::kind::qp_fatal;
    ev.type   = IBV_EVENT_QP_FATAL;
    ev.qp_num = qp_of(bad)->qp_num;
    md::from_uct(m_md)->events.deliver(ev);
    ASSERT_TRUE(wait_for([&] { return s_ep_errors > 0; }, 10)) << "the endpoint never failed";
    EXPECT_EQ(UCS_ERR_IO_ERROR, s_last_ep_error);
    EXPECT_TRUE(UCS_STATUS_IS_ERR(uct_ep_flush(bad, 0, nullptr)));
    ASSERT_TRUE(wait_for([&] { return uct_ep_am_short(good, am_id, 1, nullptr, 0) == UCS_OK; }));
    EXPECT_TRUE(wait_for([&] { return sink.count == 1; }));
    EXPECT_EQ(1u, s_ep_errors);
    EXPECT_TRUE(logged_only(logs, "qp 0x"));
}

TEST_P(lifetime, device_fatal_event_fails_every_endpoint_and_refuses_new_ones)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    uct_ep_h ab = connect(m_a, m_b), ba = connect(m_b, m_a);
    ASSERT_TRUE(ab && ba);
    verbs::async_event ev;
    ev.what = verbs::async_event::kind::device_fatal;
    ev.type = IBV_EVENT_DEVICE_FATAL;
    md::from_uct(m_md)->events.deliver(ev);
    ASSERT_TRUE(wait_for([&] { return s_ep_errors == 2; }, 10)) << s_ep_errors << " of 2 failed";
    EXPECT_EQ(UCS_ERR_IO_ERROR, s_last_ep_error);
    EXPECT_TRUE(md::from_uct(m_md)->events.device_lost());
    uct_ep_h ep;
    EXPECT_EQ(UCS_ERR_IO_ERROR, try_create_ep(m_a, m_b, &ep));
    EXPECT_EQ(2u, s_ep_errors);
    EXPECT_TRUE(logged_only(logs, "is lost"));
}

INSTANTIATE_TEST_SUITE_P(tl, lifetime, ::testing::Values("rc_zv", "ud_zv", "uc_zv"));
INSTANTIATE_TEST_SUITE_P(tl, own_qp, ::testing::Values("rc_zv"));
INSTANTIATE_TEST_SUITE_P(tl, uc_qp, ::testing::Values("uc_zv"));
INSTANTIATE_TEST_SUITE_P(tl, ud_iface_qp, ::testing::Values("ud_zv"));

// A burst that arrives while the receiver does not progress takes rc_zv's
// SRQ below its armed limit (a quarter of RX_QUEUE_LEN): the device's
// SRQ-limit event makes the receiver handle what arrived and refill at
// once, and nothing is lost.
class srq_limit : public uct_test {
protected:
    const char *tl_name() const override { return "rc_zv"; }
};

TEST_F(srq_limit, a_burst_below_the_limit_refills_the_srq)
{
    close_side(m_b);
    open_side(m_b, {{"RX_QUEUE_LEN", "256"}});
    counter_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    auto *rx = reinterpret_cast<rc::rc_iface *>(m_b.iface);
    ASSERT_EQ(0u, rx->srq_limit_events);
    // 230 of 256 buffers taken, B not progressing; A's sends complete by
    // the hardware's acknowledgements alone.
    const unsigned burst = 230;
    for (unsigned i = 0; i < burst; ++i) {
        auto start = std::chrono::steady_clock::now();
        while (uct_ep_am_short(ep, am_id, i, nullptr, 0) != UCS_OK) {
            uct_worker_progress(m_a.worker);
            ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
        }
    }
    auto start = std::chrono::steady_clock::now();
    while (uct_ep_flush(ep, 0, nullptr) != UCS_OK) {
        uct_worker_progress(m_a.worker);
        ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    }
    ASSERT_EQ(0u, sink.count);
    ASSERT_TRUE(wait_for([&] { return rx->srq_limit_events > 0; }, 10))
            << "no SRQ-limit event was handled";
    EXPECT_TRUE(wait_for([&] { return sink.count == burst; })) << sink.count;
}

} // namespace zv::test
