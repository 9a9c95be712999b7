// SPDX-License-Identifier: BSD-3-Clause
// Endpoint and QP lifetimes, on every zv transport:
//  - a destroyed endpoint has completed its sends, whether destroyed
//    outside progress, inside it, or before it connected; a new endpoint
//    takes sends at once and delivers them once connected;
//  - a QP forced into the error state: rc_zv fails its endpoint, and only
//    it; ud_zv and uc_zv reset it in place: nothing is lost, no endpoint
//    fails (ud_zv's interface QP takes no work meanwhile).
#include "tl_fixture.h"
#include "log_guard.h"

#include "md/zv_md.h"
#include "rc/rc_ep.h"
#include "rd/rd_iface.h"
#include "ud/ud_iface.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace zv::test {

namespace {

class lifetime : public tl_test {
protected:
    /// The endpoint's own QP (rc_zv and uc_zv).
    ibv_qp *qp_of(uct_ep_h ep) const
    {
        if (is("rc_zv")) {
            return reinterpret_cast<rc::rc_ep *>(ep)->qp;
        }
        return reinterpret_cast<rd::rd_ep *>(ep)->qp;
    }
};

/// rc_zv: one QP per endpoint, which cannot be reset under a live peer
/// connection (uc_zv's can: uc_qp below; ud_zv's endpoints share the
/// interface's).
class own_qp : public lifetime {
};

/// ud_zv and uc_zv: a QP in the error state is reset, keeping its number.
class qp_reset : public lifetime {};

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

/// ud_zv: one QP per interface, reset in place when it enters the error state.
class ud_iface_qp : public lifetime {
};

/// A zero-copy send's completion: the buffer is the user's again, and the
/// user writes over it at once (as a request completed by UCP may be
/// reused). If a work request could still read it, the peer would get the
/// poison.
struct poisoning_comp {
    uct_completion_t super;
    char            *slice  = nullptr;
    size_t           len    = 0;
    int              done   = 0;
    ucs_status_t     status = UCS_OK;

    static void cb(uct_completion_t *self)
    {
        auto *c   = reinterpret_cast<poisoning_comp *>(self);
        ++c->done;
        c->status = self->status;
        std::memset(c->slice, 0xee, c->len);
    }
    poisoning_comp()
    {
        super.func   = cb;
        super.count  = 1;
        super.status = UCS_OK;
    }
};

/// Counts the messages it gets and those that are not the pattern.
struct pattern_sink {
    unsigned got = 0, bad = 0;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
    {
        auto *self = static_cast<pattern_sink *>(arg);
        ++self->got;
        self->bad += check(data, length, 5) ? 0 : 1;
        return UCS_OK;
    }
};

/// The completion of one endpoint's send destroys another endpoint, inside
/// progress, and records what the other's completions had seen by then.
struct destroy_in_callback {
    uct_completion_t                  super;
    uct_ep_h                          victim = nullptr;
    const std::vector<counting_comp> *comps  = nullptr;
    const std::vector<unsigned>      *outstanding = nullptr;
    bool                              called = false;
    unsigned                          done_at_return = 0;

    static void cb(uct_completion_t *self)
    {
        auto *d = reinterpret_cast<destroy_in_callback *>(self);
        d->called = true;
        uct_ep_destroy(d->victim);
        for (unsigned i : *d->outstanding) {
            d->done_at_return += static_cast<unsigned>((*d->comps)[i].done);
        }
    }
};

} // namespace

/// uct_ep_destroy() with zero-copy sends outstanding (posted, not flushed,
/// no progress since) has called every one's completion when it returns,
/// and a pending flush's, as UCP's forced close relies on (UCX's
/// test_uct_ep.destroy_entity_after_send). Each completion comes only once
/// no work request can read the send's buffer: each poisons its buffer,
/// and the peer never receives the poison. On ud_zv and uc_zv the
/// destroyed endpoint keeps nothing that waits for the device (it is not
/// left in the graveyard).
TEST_P(lifetime, a_destroyed_endpoint_has_completed_its_zero_copy_sends)
{
    pattern_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, pattern_sink::handler, &sink,
                                               0));
    constexpr unsigned rounds = 10, max_ops = 128;
    const size_t len = std::min<size_t>(m_a.attr.cap.am.max_zcopy, 4096);
    region r         = reg(len * max_ops, UCT_MD_MEM_ACCESS_ALL);
    unsigned outstanding_total = 0;
    for (unsigned round = 0; round < rounds; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        uct_ep_h ep = connected_ep(m_a, m_b);
        ASSERT_NE(nullptr, ep);
        std::vector<poisoning_comp> comps(max_ops);
        std::vector<unsigned> outstanding;
        for (unsigned i = 0; i < max_ops; ++i) {
            char *slice     = static_cast<char *>(r.addr) + i * len;
            comps[i].slice  = slice;
            comps[i].len    = len;
            fill(slice, len, 5);
            uct_iov_t iov   = {slice, len, r.memh, 0, 1};
            ucs_status_t st = uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0,
                                              &comps[i].super);
            if (st == UCS_INPROGRESS) {
                outstanding.push_back(i);
                continue;
            }
            if (st == UCS_OK) {
                continue; // done at once: no completion comes
            }
            ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
            break;
        }
        counting_comp flush_comp;
        ucs_status_t fst = uct_ep_flush(ep, 0, &flush_comp.super);
        ASSERT_TRUE((fst == UCS_OK) || (fst == UCS_INPROGRESS) ||
                    (fst == UCS_ERR_NO_RESOURCE)) << ucs_status_string(fst);
        outstanding_total += outstanding.size();

        uct_ep_destroy(ep); // no progress since the sends

        unsigned missing = 0;
        for (unsigned i : outstanding) {
            if (comps[i].done != 1) {
                ++missing;
                continue;
            }
            EXPECT_TRUE((comps[i].status == UCS_ERR_CANCELED) || (comps[i].status == UCS_OK))
                    << "send " << i << ": " << ucs_status_string(comps[i].status);
        }
        EXPECT_EQ(0u, missing) << "of " << outstanding.size()
                               << " zero-copy sends outstanding at uct_ep_destroy()";
        if (fst == UCS_INPROGRESS) {
            EXPECT_EQ(1, flush_comp.done) << "the pending flush was not completed";
        }
        if (is_rd()) {
            EXPECT_TRUE(rd::to_rd(m_a.iface)->graveyard.empty())
                    << "the destroyed endpoint still waits for the device";
        }
        if (HasFailure()) {
            break;
        }
    }
    EXPECT_GT(outstanding_total, 0u) << "nothing was outstanding: the test tested nothing";
    // The interface is fine: a new endpoint's messages arrive. Whatever
    // the destroyed endpoints' sends delivered was not poisoned.
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    expect_connection_works(ep, 7, am_id + 1);
    EXPECT_EQ(0u, sink.bad) << "of " << sink.got << " messages received, " << sink.bad
                            << " carried the poison written at their completion";
    dereg(r);
}

/// The same when the endpoint is destroyed from a completion callback,
/// inside progress: its sends have not been acknowledged (its peer does
/// not progress), some may still be in the send queue.
TEST_P(lifetime, an_endpoint_destroyed_inside_progress_has_completed_its_sends)
{
    uct_side c;
    using self_t = std::remove_pointer_t<decltype(this)>;
    struct closer {
        self_t       *t;
        uct_side     *s;
        ~closer() { t->close_side(*s); } // (also when an ASSERT returns)
    } close_c{this, &c};
    open_side(c);
    unsigned got_b = 0, got_c = 0;
    auto counter = [](void *arg, void *, size_t, unsigned) {
        ++*static_cast<unsigned *>(arg);
        return UCS_OK;
    };
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter, &got_b, 0));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(c.iface, am_id, counter, &got_c, 0));
    const size_t len = std::min<size_t>(m_a.attr.cap.am.max_zcopy, 4096);
    region r         = reg(len, UCT_MD_MEM_ACCESS_ALL);
    uct_iov_t iov    = {r.addr, len, r.memh, 0, 1};

    for (unsigned round = 0; round < 5; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        uct_ep_h victim = create_ep(m_a, m_b);
        ASSERT_TRUE(run_until({&m_a, &m_b, &c}, [&] {
            return uct_ep_flush(victim, 0, nullptr) == UCS_OK;
        }));
        uct_ep_h other = connected_ep(m_a, c);
        ASSERT_NE(nullptr, other);
        std::vector<counting_comp> comps(64);
        std::vector<unsigned> outstanding;
        for (unsigned i = 0; i < comps.size(); ++i) {
            ucs_status_t st = uct_ep_am_zcopy(victim, am_id, nullptr, 0, &iov, 1, 0,
                                              &comps[i].super);
            if (st == UCS_INPROGRESS) {
                outstanding.push_back(i);
            } else if (st != UCS_OK) {
                ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
                break;
            }
        }
        destroy_in_callback d;
        d.super.func   = destroy_in_callback::cb;
        d.super.count  = 1;
        d.super.status = UCS_OK;
        d.victim       = victim;
        d.comps        = &comps;
        d.outstanding  = &outstanding;
        ucs_status_t st = UCS_ERR_NO_RESOURCE;
        ASSERT_TRUE(run_until({&m_a, &c}, [&] {
            st = uct_ep_am_zcopy(other, am_id, nullptr, 0, &iov, 1, 0, &d.super);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, st);
        // m_b does not progress: the victim's sends stay unacknowledged.
        ASSERT_TRUE(run_until({&m_a, &c}, [&] { return d.called; }, 20))
                << "the other endpoint's send did not complete";
        EXPECT_EQ(outstanding.size(), d.done_at_return)
                << "completions called when uct_ep_destroy() returned inside progress";
        // Progress frees what was deferred; nothing is left waiting.
        run_until({&m_a, &m_b, &c}, [&] { return false; }, 0.2);
        if (is_rd()) {
            EXPECT_TRUE(rd::to_rd(m_a.iface)->graveyard.empty());
        }
        for (unsigned i : outstanding) {
            EXPECT_EQ(1, comps[i].done) << "send " << i << " completed twice or never";
        }
        uct_ep_destroy(other);
        if (HasFailure()) {
            break;
        }
    }
    dereg(r);
}

/// A new endpoint takes sends at once, before its connection exists, as
/// UCX's transports do once connected (uct_p2p_am_alignment sends right
/// after uct_ep_create, and UCP's wireup sends its first message so):
/// what is sent waits for the connection and arrives in order, a zero-copy
/// send completes once acknowledged, and a flush covers them.
TEST_P(lifetime, a_new_endpoint_takes_sends_at_once_and_delivers_them_once_connected)
{
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    const size_t len = sizeof(uint64_t);
    region r         = reg(len, UCT_MD_MEM_ACCESS_ALL);
    uint64_t five    = 5;
    std::memcpy(r.addr, &five, len);
    uct_ep_h ep = create_ep(m_a, m_b); // no progress since: not connected
    ASSERT_NE(nullptr, ep);
    for (uint64_t v = 0; v < 4; ++v) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, v, nullptr, 0)) << "send " << v;
    }
    uint64_t four = 4;
    ASSERT_EQ(static_cast<ssize_t>(len),
              uct_ep_am_bcopy(ep, am_id, [](void *dest, void *arg) -> size_t {
                  std::memcpy(dest, arg, sizeof(uint64_t));
                  return sizeof(uint64_t);
              }, &four, 0));
    counting_comp zcomp, fcomp;
    uct_iov_t iov = {r.addr, len, r.memh, 0, 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0, &zcomp.super));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep, 0, &fcomp.super));
    EXPECT_EQ(0u, sink.got.size());
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] {
        return (sink.got.size() == 6) && (zcomp.done == 1) && (fcomp.done == 1);
    }, 30)) << sink.got.size() << " of 6 arrived, zero-copy completion " << zcomp.done
            << ", flush " << fcomp.done;
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        EXPECT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_EQ(UCS_OK, zcomp.status);
    EXPECT_EQ(UCS_OK, fcomp.status);
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    dereg(r);
}

/// An endpoint destroyed before its connection existed has completed what
/// it sent meanwhile (UCS_ERR_CANCELED) when uct_ep_destroy returns, and
/// none of it reaches the peer afterwards.
TEST_P(lifetime, an_endpoint_destroyed_while_it_connects_cancels_what_it_sent)
{
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    region r = reg(64, UCT_MD_MEM_ACCESS_ALL);
    for (int round = 0; round < 3; ++round) {
        uct_ep_h ep = create_ep(m_a, m_b);
        ASSERT_NE(nullptr, ep);
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 1, nullptr, 0));
        counting_comp z, f;
        uct_iov_t iov = {r.addr, 64, r.memh, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0, &z.super));
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep, 0, &f.super));
        uct_ep_destroy(ep);
        EXPECT_EQ(1, z.done) << "the zero-copy send was not completed";
        EXPECT_EQ(UCS_ERR_CANCELED, z.status) << ucs_status_string(z.status);
        EXPECT_EQ(1, f.done) << "the flush was not completed";
    }
    run_until({&m_a, &m_b}, [] { return false; }, 1.0);
    EXPECT_EQ(0u, sink.got.size()) << "a destroyed endpoint's message arrived";
    EXPECT_EQ(0u, s_ep_errors);
    dereg(r);
}

ZV_INSTANTIATE(lifetime, ZV_TLS_ALL);


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

// The device's events as the interfaces get them (from the md's reader in
// UCX's async thread, through the worker's progress): a QP-fatal event
// fails that endpoint only (a device-fatal event: faults_test.cc).
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

/// A QP that enters the error state (a send while its port went down, or
/// after the port was back but before its address was) is reset, keeping
/// its number: nothing is lost and no endpoint fails, whether it is the
/// sender's QP or the one the receiver's acks leave on. (ud_zv resets its
/// one QP; uc_zv the connection's, and failed the endpoint before.)
TEST_P(qp_reset, a_qp_in_the_error_state_is_reset_and_loses_nothing)
{
    uct_side c, d;
    open_side(c);
    open_side(d);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep   = create_ep(c, d);
    uct_ep_h back = create_ep(d, c); // (uc_zv: on the QP d's acks leave on)
    uint64_t next = 0;
    ASSERT_TRUE(send_values(ep, next, 100, {&c, &d}, 10.0));
    // (connected both ways: a QP still in RESET cannot be put in error)
    run_until({&c, &d}, [&] { return sink.got.size() >= next; }, 10.0);
    ASSERT_EQ(next, sink.got.size());
    const uint64_t resets_c = rd::to_rd(c.iface)->qp_resets;
    const uint64_t resets_d = rd::to_rd(d.iface)->qp_resets;
    for (uct_ep_h broken : {ep, back}) {
        verbs::qp_to_error(rd::to_ep(broken)->qp);
        ASSERT_TRUE(send_values(ep, next, next + 300, {&c, &d}, 20.0))
                << "stalled; d: signaled " << rd::to_rd(d.iface)->tx_signaled << ", outstanding "
                << rd::to_rd(d.iface)->tx_outstanding << ", receives posted "
                << rd::to_rd(d.iface)->rx_ring.posted() << "; c: signaled "
                << rd::to_rd(c.iface)->tx_signaled << ", receives posted "
                << rd::to_rd(c.iface)->rx_ring.posted();
        ASSERT_EQ(next, 100u + ((broken == ep) ? 300u : 600u)) << "the sends stalled";
    }
    run_until({&c, &d}, [&] { return sink.got.size() >= next; }, 20.0);
    ASSERT_EQ(next, sink.got.size()) << "messages lost";
    for (uint64_t v = 0; v < next; ++v) {
        ASSERT_EQ(v, sink.got[v]) << "out of order or twice";
    }
    EXPECT_EQ(0u, s_ep_errors) << "an endpoint failed with its QP";
    EXPECT_GT(rd::to_rd(c.iface)->qp_resets, resets_c) << "the sender's QP was not reset";
    EXPECT_GT(rd::to_rd(d.iface)->qp_resets, resets_d) << "the receiver's QP was not reset";
    uct_ep_destroy(back);
    uct_ep_destroy(ep);
}

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

ZV_INSTANTIATE(own_qp, ZV_TLS_RC);
ZV_INSTANTIATE(qp_reset, ZV_TLS_RD);
ZV_INSTANTIATE(uc_qp, "uc_zv");
ZV_INSTANTIATE(ud_iface_qp, "ud_zv");

} // namespace zv::test
