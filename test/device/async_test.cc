// SPDX-License-Identifier: BSD-3-Clause
// A rank that computes (its worker does not progress): its interface's
// async side answers for it. rc_zv's connection manager answers a first
// connection request (the device holds what arrives); ud_zv's and
// uc_zv's software reliability accepts, acknowledges and sends what its
// worker posted. An idle interface arms no timer, and the first packet
// or request wakes it.
#include "tl_fixture.h"

#include "rc/rc_iface.h"
#include "rd/rd_iface.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace zv::test {

namespace {

/// rc_zv's connection manager, answering from the async side.
class async_cm : public tl_test {};

/// The software reliability's async side (ud_zv, uc_zv).
class async_rd : public tl_test {};

/// Whether the async side's timer of 'side' sleeps, and how often it went
/// to sleep and was woken by a packet.
struct timer_state {
    bool asleep;
    uint64_t sleeps, wakes_by_event, runs;
};
timer_state timer_of(const uct_side &side)
{
    rd::rd_iface *r = rd::to_rd(side.iface);
    std::lock_guard<std::mutex> guard(r->as.timer.lock);
    return {r->as.timer.asleep, r->as.timer.sleeps, r->as.timer.wakes_by_event, r->as.runs};
}

} // namespace

/// A rank that computes (no progress) when a peer connects to it for the
/// first time and sends: its async side answers the connection request,
/// so the sender's endpoint connects instead of failing at CONN_TIMEOUT;
/// the device holds what does not fit the computing rank's 16 receive
/// buffers (receiver-not-ready, retried without end), and its next
/// progress calls hand every message to UCP, once and in order.
TEST_P(async_cm, a_computing_peer_is_connected_to_and_loses_nothing)
{
    uct_side c, d;
    open_side(c, {{"CONN_TIMEOUT", "1s"}});
    open_side(d, {{"CONN_TIMEOUT", "1s"}, {"RX_QUEUE_LEN", "16"}, {"RX_BATCH", "4"}});
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, 9, am_sink::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    // d computes: only c progresses, for three CONN_TIMEOUTs, sending 100.
    const unsigned count = 100;
    unsigned sent        = 0;
    run_until({&c}, [&] {
        if ((sent < count) && (uct_ep_am_short(ep, 9, sent, nullptr, 0) == UCS_OK)) {
            ++sent;
        }
        return false;
    }, 3.0);
    EXPECT_EQ(0u, s_ep_errors) << "the sender could not connect to its computing peer";
    EXPECT_GT(sent, 0u) << "never connected";
    EXPECT_EQ(0u, sink.messages.size()) << "a message was delivered without d's progress";
    // d is back.
    ASSERT_TRUE(run_until({&c, &d}, [&] {
        if ((sent < count) && (uct_ep_am_short(ep, 9, sent, nullptr, 0) == UCS_OK)) {
            ++sent;
        }
        return (sink.messages.size() == count) && (uct_ep_flush(ep, 0, nullptr) == UCS_OK);
    }, 30)) << sink.messages.size() << " of " << count << " delivered";
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t v;
        ASSERT_EQ(sizeof(v), sink.messages[i].size());
        std::memcpy(&v, sink.messages[i].data(), sizeof(v));
        ASSERT_EQ(i, v) << "each message once, in order";
    }
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

/// An interface whose connection manager has nothing in hand, while its
/// worker computes, arms no timer; the first connection request wakes it,
/// and it answers: the first connection to a computing peer still works.
TEST_P(async_cm, an_idle_interface_sleeps_while_its_worker_computes_and_a_connecting_peer_wakes_it)
{
    uct_side c, d;
    open_side(c, {{"CONN_TIMEOUT", "1s"}});
    open_side(d, {{"CONN_TIMEOUT", "1s"}});
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, 9, am_sink::handler, &sink, 0));
    iface::async_timer &dt = rc::to_rc(d.iface)->timer;
    auto asleep = [&dt] {
        std::lock_guard<std::mutex> guard(dt.lock);
        return dt.asleep;
    };
    auto start = std::chrono::steady_clock::now();
    while (!asleep() && (std::chrono::steady_clock::now() - start < std::chrono::seconds(3))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(asleep()) << "the idle interface's timer still ticks";
    uint64_t woken;
    {
        std::lock_guard<std::mutex> guard(dt.lock);
        woken = dt.wakes_by_event;
    }
    // d computes; c connects and sends.
    uct_ep_h ep     = create_ep(c, d);
    unsigned sent   = 0;
    run_until({&c}, [&] {
        if ((sent < 10) && (uct_ep_am_short(ep, 9, sent, nullptr, 0) == UCS_OK)) {
            ++sent;
        }
        return sent == 10;
    }, 5.0);
    EXPECT_EQ(10u, sent);
    // (The sends wait for the connection; its device acknowledges them.)
    EXPECT_TRUE(run_until({&c}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 5.0))
            << "the sender could not connect to its computing peer";
    EXPECT_EQ(0u, s_ep_errors);
    {
        std::lock_guard<std::mutex> guard(dt.lock);
        EXPECT_GT(dt.wakes_by_event, woken) << "no connection request woke d's timer";
    }
    EXPECT_EQ(0u, sink.messages.size()) << "a message was delivered without d's progress";
    ASSERT_TRUE(run_until({&c, &d}, [&] {
        return (sink.messages.size() == 10) && (uct_ep_flush(ep, 0, nullptr) == UCS_OK);
    }, 10));
    for (uint64_t i = 0; i < 10; ++i) {
        uint64_t v;
        std::memcpy(&v, sink.messages[i].data(), sizeof(v));
        ASSERT_EQ(i, v);
    }
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

ZV_INSTANTIATE(async_cm, ZV_TLS_RC);


/// What a new endpoint sent before its connection existed leaves when the
/// connection does, even while its worker computes: the async side
/// completes the connection and posts it (a rank that sends and then
/// computes is not the one its peer waits for). (rc_zv's go at its
/// worker's next progress: its send path does not take the async gate.)
TEST_P(async_rd, what_a_new_endpoint_sent_arrives_while_its_worker_computes)
{
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    for (uint64_t v = 0; v < 4; ++v) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, v, nullptr, 0)) << "send " << v;
    }
    // m_a's worker computes from here: only m_b progresses.
    EXPECT_TRUE(run_until({&m_b}, [&] { return sink.got.size() == 4; }, 20))
            << sink.got.size() << " of 4 arrived while the sender computed";
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        EXPECT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; },
                          20));
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
}

/// A rank that computes (no progress) while its peer sends to it: its
/// async side accepts and acknowledges, so the sender keeps its endpoint
/// past the peer timeout, and the worker's next progress call hands every
/// message to UCP, once and in order - none from the async thread.
TEST_P(async_rd, a_computing_receiver_keeps_its_peer_and_loses_nothing)
{
    // (TIMEOUT 3 s: a loaded host can hold a VM's async thread for a
    // second; the point is a compute phase longer than the timeout.)
    uct_side c, d;
    am_values sink;
    uct_ep_h ep = delivering_pair(c, {{"TIMEOUT", "3s"}}, d, {{"TIMEOUT", "3s"}}, sink);
    ASSERT_NE(nullptr, ep);
    // (The async side may have taken one of the first 10 between two of
    // d's progress calls: what it accepts is counted from here.)
    rd::rd_iface *dr          = rd::to_rd(d.iface);
    const uint64_t ams_before = dr->as.ams;
    // d computes: only c progresses, for two TIMEOUTs, sending 100 more.
    unsigned sent = 0;
    run_until({&c}, [&] {
        if ((sent < 100) && (uct_ep_am_short(ep, am_id, 10 + sent, nullptr, 0) == UCS_OK)) {
            ++sent;
        }
        return false;
    }, 6.0);
    EXPECT_EQ(100u, sent);
    EXPECT_EQ(0u, s_ep_errors) << "the sender declared its computing peer dead";
    EXPECT_EQ(10u, sink.got.size()) << "a message was delivered without d's progress";
    EXPECT_GT(dr->as.runs, 0u) << "d's async side never ran";
    EXPECT_EQ(100u, dr->as.ams - ams_before)
            << "d's async side accepted what it had room for: all";
    // d is back: its next progress call hands them over.
    uct_worker_progress(d.worker);
    ASSERT_EQ(110u, sink.got.size());
    for (uint64_t v = 0; v < 110; ++v) {
        ASSERT_EQ(v, sink.got[v]) << "each message once, in order";
    }
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    EXPECT_EQ(110u, sink.got.size()) << "a message was delivered twice";
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
}

/// An interface with nothing outstanding, whose worker computes, arms no
/// timer (the async thread does nothing for it), and still answers at once
/// when a peer sends: the packet's completion wakes it.
TEST_P(async_rd, an_idle_interface_sleeps_while_its_worker_computes_and_a_packet_wakes_it)
{
    uct_side c, d;
    am_values sink;
    uct_ep_h ep = delivering_pair(c, {{"TIMEOUT", "3s"}}, d, {{"TIMEOUT", "3s"}}, sink);
    ASSERT_NE(nullptr, ep);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    // Both compute: within a few ticks, both timers sleep, and stay asleep.
    auto start = std::chrono::steady_clock::now();
    while ((!timer_of(c).asleep || !timer_of(d).asleep) &&
           (std::chrono::steady_clock::now() - start < std::chrono::seconds(3))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    timer_state cs = timer_of(c), ds = timer_of(d);
    ASSERT_TRUE(cs.asleep) << "the idle sender's timer still ticks";
    ASSERT_TRUE(ds.asleep) << "the idle receiver's timer still ticks";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(ds.runs, timer_of(d).runs) << "the async side ran for an idle interface";
    EXPECT_EQ(ds.sleeps, timer_of(d).sleeps);
    // c sends (its worker's first call wakes its own timer); d still
    // computes: its async side, woken by the first packet, takes them all.
    unsigned sent = 0;
    run_until({&c}, [&] {
        if ((sent < 20) && (uct_ep_am_short(ep, am_id, 10 + sent, nullptr, 0) == UCS_OK)) {
            ++sent;
        }
        return (sent == 20) && (uct_ep_flush(ep, 0, nullptr) == UCS_OK);
    }, 10.0);
    EXPECT_EQ(20u, sent);
    EXPECT_EQ(UCS_OK, uct_ep_flush(ep, 0, nullptr)) << "d's async side acknowledged nothing";
    EXPECT_FALSE(timer_of(c).asleep && (timer_of(c).sleeps == cs.sleeps))
            << "c's worker did not wake its timer";
    EXPECT_GT(timer_of(d).wakes_by_event, ds.wakes_by_event) << "no packet woke d's timer";
    EXPECT_EQ(0u, s_ep_errors);
    EXPECT_EQ(10u, sink.got.size()) << "a message was delivered without d's progress";
    // d is back: each message once, in order.
    uct_worker_progress(d.worker);
    ASSERT_EQ(30u, sink.got.size());
    for (uint64_t v = 0; v < 30; ++v) {
        ASSERT_EQ(v, sink.got[v]);
    }
    uct_ep_destroy(ep);
}


ZV_INSTANTIATE(async_rd, ZV_TLS_RD);

} // namespace zv::test
