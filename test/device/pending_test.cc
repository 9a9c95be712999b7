// SPDX-License-Identifier: BSD-3-Clause
// Pending requests and flush, on every zv transport: requests queued on an
// endpoint out of resources all go, in order, and no send overtakes them;
// a request's callback may destroy endpoints or purge its own queue inside
// progress. Over ud_zv and uc_zv, the software reliability's send budget:
// the window, signaled sends, unsignaled ones held by quiet endpoints.
#include "tl_fixture.h"

#include "rd/rd_iface.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace zv::test {

namespace {

class pending : public tl_test {
protected:
    uint64_t needs() const override { return UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_PENDING; }

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
};

/// The software reliability's send budget (ud_zv, uc_zv): WINDOW,
/// TX_MODERATION, TX_QUEUE_LEN.
class send_budget : public tl_test {};

/// A pending request that makes progress a few times (UCS_INPROGRESS)
/// before it sends, as UCX's test_uct_pending's requests do.
struct slow_request {
    uct_pending_req_t super;
    uct_ep_h          ep;
    uint64_t          value;
    int               countdown = 5;
    unsigned         *left;

    /// A request to send 'value' on 'ep'; 'left' counts those not yet sent.
    static slow_request *make(uct_ep_h ep, uint64_t value, unsigned *left)
    {
        auto *r       = new slow_request{};
        r->super.func = cb;
        r->ep         = ep;
        r->value      = value;
        r->left       = left;
        return r;
    }

    static ucs_status_t cb(uct_pending_req_t *self)
    {
        auto *r = reinterpret_cast<slow_request *>(self);
        if (r->countdown > 0) {
            --r->countdown;
            return UCS_INPROGRESS;
        }
        ucs_status_t st = uct_ep_am_short(r->ep, am_id, r->value, nullptr, 0);
        if (st == UCS_OK) {
            --*r->left;
            delete r;
        }
        return st;
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

/// Add 'r' to 'ep' (the endpoint is full, so BUSY means a bug).
void add_pending(uct_ep_h ep, action_req &r)
{
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &r.super, 0));
}

} // namespace

/// Sends until the resources run out, every refused one queued as a
/// pending request that answers UCS_INPROGRESS five times before it sends:
/// all of them go out, in order, whatever the dispatch's budget and however
/// few send completions the last of them make (UCX's
/// test_uct_pending.pending_op, which hung over rc_zv).
TEST_P(pending, slow_pending_requests_all_go_out_in_order)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    uint64_t n      = 0;
    unsigned queued = 0;
    auto end        = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while ((n < 10000) && (std::chrono::steady_clock::now() < end)) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, n, nullptr, 0);
        if (st == UCS_ERR_NO_RESOURCE) {
            auto *r = slow_request::make(ep, n, &queued);
            st = uct_ep_pending_add(ep, &r->super, 0);
            if (st == UCS_ERR_BUSY) {
                delete r;
                continue; // resources came back: send it now
            }
            ASSERT_EQ(UCS_OK, st);
            ++queued;
        } else {
            ASSERT_EQ(UCS_OK, st);
        }
        ++n;
    }
    ASSERT_GT(queued, 0u) << "the resources never ran out in 3 s";
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] { return sink.got.size() == n; }, 30))
            << sink.got.size() << " of " << n << " arrived, " << queued
            << " requests still queued";
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        ASSERT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_EQ(0u, queued);
    EXPECT_EQ(0u, s_ep_errors);
}

/// A send does not overtake the endpoint's pending requests, even when the
/// resources came back without the worker (the async side took the peer's
/// acknowledgements while the application computed): UCX's
/// test_uct_pending.send_ooo_with_pending, which uc_zv failed.
TEST_P(pending, a_send_does_not_overtake_a_pending_request)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    uint64_t n    = 0;
    unsigned left = 0;
    auto end      = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    ucs_status_t st;
    while ((st = uct_ep_am_short(ep, am_id, n, nullptr, 0)) == UCS_OK) {
        ++n;
        ASSERT_LT(std::chrono::steady_clock::now(), end) << "the resources never ran out";
    }
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
    auto *r = slow_request::make(ep, n++, &left);
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &r->super, 0));
    ++left;
    // Only the receiver progresses for a while: it acknowledges, and this
    // side's async side may take the acknowledgements.
    run_until({&m_b}, [] { return false; }, 1.5);
    // The next message goes after the queued one, whatever the resources.
    ASSERT_TRUE(wait_for([&] {
        return (st = uct_ep_am_short(ep, am_id, n, nullptr, 0)) != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_EQ(UCS_OK, st);
    ++n;
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] { return sink.got.size() == n; }, 30))
            << sink.got.size() << " of " << n << " arrived";
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        ASSERT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_EQ(0u, left);
    EXPECT_EQ(0u, s_ep_errors);
}

TEST_P(pending, callback_destroys_its_endpoint_and_another_inside_progress)
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

TEST_P(pending, callback_purges_its_own_queue)
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

ZV_INSTANTIATE(pending, ZV_TLS_ALL);


TEST_P(send_budget, pending_when_the_window_is_full_then_flush)
{
    uct_side c;
    open_side(c, {{"WINDOW", "8"}});
    ordered_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, ordered_sink::handler,
                                               &sink, 0));
    uct_ep_h ep = create_ep(c, m_b);
    ASSERT_TRUE(run_until({&c, &m_b}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    // Without progress the window fills after 8 packets.
    unsigned sent = 0;
    for (; sent < 100; ++sent) {
        msg_pack m{sent, 100};
        if (uct_ep_am_bcopy(ep, am_id, pack_msg, &m, 0) < 0) {
            break;
        }
    }
    EXPECT_EQ(8u, sent);
    struct req_t {
        uct_pending_req_t super;
        uct_ep_h          ep;
        unsigned          next, end, calls = 0;
    } req;
    req.ep   = ep;
    req.next = sent;
    req.end  = 200;
    req.super.func = [](uct_pending_req_t *self) -> ucs_status_t {
        auto *r = reinterpret_cast<req_t *>(self);
        ++r->calls;
        while (r->next < r->end) {
            msg_pack m{r->next, 100};
            ssize_t s = uct_ep_am_bcopy(r->ep, am_id, pack_msg, &m, 0);
            if (s < 0) {
                return static_cast<ucs_status_t>(s);
            }
            ++r->next;
        }
        return UCS_OK;
    };
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &req.super, 0));
    ASSERT_TRUE(run_until({&c, &m_b}, [&] { return sink.next == 200; }))
            << "delivered " << sink.next << ", pending called " << req.calls;
    EXPECT_GT(req.calls, 1u); // it ran out of window and was called again
    counting_comp f;
    ucs_status_t status = uct_ep_flush(ep, 0, &f.super);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(run_until({&c, &m_b}, [&] { return f.done == 1; }));
    } else {
        EXPECT_EQ(UCS_OK, status);
    }
    EXPECT_EQ(0u, sink.bad) << sink.first_error;
    uct_ep_destroy(ep);
    close_side(c);
}

/// A send completion is requested for one send in TX_MODERATION: the
/// others are released by their acknowledgements (and 1 means every one).
/// (uc_zv: on the endpoint's own QP.)
TEST_P(send_budget, signals_one_send_in_tx_moderation)
{
    for (const char *m : {"32", "1"}) {
        SCOPED_TRACE(std::string("TX_MODERATION=") + m);
        uct_side c, d;
        open_side(c, {{"TX_MODERATION", m}});
        open_side(d);
        am_values sink;
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
        uct_ep_h ep = create_ep(c, d);
        ASSERT_TRUE(deliver(ep, 640, sink, {&c, &d}));
        ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
        const rd::rd_iface &ci = *rd::to_rd(c.iface);
        EXPECT_GE(ci.tx_posted, 640u);
        if (std::string(m) == "1") {
            EXPECT_TRUE(run_until({&c}, [&] { return ci.tx_completions == ci.tx_posted; }, 5))
                    << ci.tx_completions << " completions of " << ci.tx_posted;
        } else {
            // One in 32 of the first postings; every resend and control
            // packet (the connection request, acknowledgement requests) is
            // signaled.
            const uint64_t first = ci.tx_posted - ci.resent;
            EXPECT_LE(ci.tx_completions, first / 32 + ci.resent + 8)
                    << ci.tx_posted << " posted, " << ci.resent << " of them resent";
        }
        uct_ep_destroy(ep);
        close_side(c);
        close_side(d);
    }
}

/// Endpoints that went quiet with unsignaled sends hold at most half the
/// send budget (uc_zv: each on its own QP, where only its own next signaled
/// send would cover them): sending round-robin over more endpoints than
/// TX_QUEUE_LEN / TX_MODERATION never gets stuck, and once the endpoints
/// are gone the budget is whole again.
TEST_P(send_budget, quiet_endpoints_unsignaled_sends_hold_at_most_half_the_send_budget)
{
    uct_side c, d;
    open_side(c, {{"TX_QUEUE_LEN", "64"}, {"TX_MODERATION", "32"}});
    open_side(d);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    constexpr unsigned neps = 8, rounds = 40;
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < neps; ++i) {
        eps.push_back(create_ep(c, d));
        ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(eps.back(), 0, nullptr) == UCS_OK; }));
    }
    const rd::rd_iface &ci = *rd::to_rd(c.iface);
    unsigned most_silent = 0;
    auto start = std::chrono::steady_clock::now();
    for (unsigned n = 0; n < neps * rounds;) {
        ucs_status_t st = uct_ep_am_short(eps[n % neps], am_id, n, nullptr, 0);
        if (st == UCS_OK) {
            ++n;
            most_silent = std::max(most_silent, ci.tx_silent);
            continue;
        }
        ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
        uct_worker_progress(c.worker);
        uct_worker_progress(d.worker);
        ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
                << "sender stuck at message " << n << ": " << ci.tx_outstanding
                << " work requests outstanding, " << ci.tx_silent << " of them unsignaled";
    }
    EXPECT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() == neps * rounds; }, 20))
            << sink.got.size() << " of " << neps * rounds;
    EXPECT_LE(most_silent, 32u);
    // Acknowledged, so destroying them drops nothing: what they leave is
    // their unsignaled tails.
    for (uct_ep_h ep : eps) {
        ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    }
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
    EXPECT_TRUE(run_until({&c, &d}, [&] {
        return ci.graveyard.empty() && (ci.tx_outstanding == 0);
    }, 10)) << ci.graveyard.size() << " endpoints kept, " << ci.tx_outstanding
            << " work requests outstanding (" << ci.tx_silent << " unsignaled)";
    close_side(c);
    close_side(d);
}


ZV_INSTANTIATE(send_budget, ZV_TLS_RD);

} // namespace zv::test
