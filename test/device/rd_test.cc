// SPDX-License-Identifier: BSD-3-Clause
// The software reliability of ud_zv and uc_zv (src/rd) from outside: its
// timers (no completion waits for a delayed acknowledgement, an idle
// progress call reads no clock, a connection request leaves at once), the
// graveyard of destroyed endpoints, ud_zv's reclaim of a silent peer's
// receive connection, and uc_zv's one-packet mode.
#include "clock_reads.h"
#include "tl_fixture.h"

#include "rd/rd_iface.h"
#include "ud/ud_iface.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace zv::test {

namespace {

/// Acknowledgement, resend and probe timers (ud_zv, uc_zv).
class timers : public tl_test {};

/// Destroyed endpoints whose sends the QP may still read (ud_zv, uc_zv).
class graveyard : public tl_test {};

/// ud_zv only: uc_zv's receive state goes with its QP, which the connection
/// manager reclaims (the faults suite kills real peers for both).
class reclaim : public tl_test {};

/// UCX_UC_ZV_ONE_PACKET: on caps active messages and puts at one packet of
/// the port's MTU, off allows SEG_SIZE / MAX_WRITE, auto is on for
/// Soft-RoCE (whose UC responder never recovers from a truncated message)
/// and off elsewhere. Data checked in both modes (puts in faults_test.cc's
/// put_under_faults, AM here).
class one_packet : public tl_test {};

} // namespace

/// Nobody waits for a delayed ack: a zero-copy send's completion (and on
/// uc_zv a put's) and a flush come back within round trips, not after
/// ACK_DELAY, set to 2 s here so that one that waited for it fails.
TEST_P(timers, completions_and_flush_do_not_wait_for_the_delayed_ack)
{
    uct_side c, d;
    unsigned got = 0;
    uct_ep_h ep  = connected_pair(c, d, {{"ACK_DELAY", "2s"}, {"RTO", "4s"}, {"RTO_MAX", "8s"},
                                         {"TIMEOUT", "60s"}}, &got);
    ASSERT_NE(nullptr, ep);
    region src = reg(512, UCT_MD_MEM_ACCESS_LOCAL_READ);
    region dst = reg(512, UCT_MD_MEM_ACCESS_REMOTE_PUT);
    auto seconds_until = [&](auto pred) {
        auto start = std::chrono::steady_clock::now();
        EXPECT_TRUE(run_until({&c, &d}, pred, 10));
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (int i = 0; i < 3; ++i) {
        uct_iov_t iov = {src.addr, 512, src.memh, 0, 1};
        counting_comp comp;
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0, &comp.super));
        EXPECT_LT(seconds_until([&] { return comp.done == 1; }), 1.0) << "am_zcopy " << i;
        EXPECT_EQ(UCS_OK, comp.status);
        if (is_uc()) {
            counting_comp put;
            ASSERT_EQ(UCS_INPROGRESS,
                      uct_ep_put_zcopy(ep, &iov, 1, reinterpret_cast<uintptr_t>(dst.addr),
                                       dst.rkey.rkey, &put.super));
            EXPECT_LT(seconds_until([&] { return put.done == 1; }), 1.0) << "put_zcopy " << i;
        }
        // A send nobody waits for, then a flush that does.
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 0, nullptr, 0));
        counting_comp flushed;
        ucs_status_t status = uct_ep_flush(ep, 0, &flushed.super);
        ASSERT_TRUE((status == UCS_INPROGRESS) || (status == UCS_OK)) << ucs_status_string(status);
        if (status == UCS_INPROGRESS) {
            EXPECT_LT(seconds_until([&] { return flushed.done == 1; }), 1.0) << "flush " << i;
        }
        // And the polled form, as UCP's own flush uses it.
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 0, nullptr, 0));
        EXPECT_LT(seconds_until([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }), 1.0)
                << "polled flush " << i;
    }
    EXPECT_TRUE(run_until({&c, &d}, [&] { return got == 9; })) << got;
    uct_ep_destroy(ep);
    dereg(src);
    dereg(dst);
    close_side(d);
    close_side(c);
}

/// A progress call that finds nothing reads no clock, while a packet is
/// unacknowledged (the sender) or an acknowledgement owed (the receiver).
/// Where UCX does not trust the TSC (the Soft-RoCE VM, or any guest without
/// an invariant one) ucs_get_time() is gettimeofday(), a system call: a
/// spin on one per call stretched every ud_zv round trip (am_lat 1.1x
/// ud_verbs'). The timers, whose tick is half of ACK_DELAY or RTO, are
/// looked at every 16th call.
TEST_P(timers, an_idle_progress_call_reads_no_clock)
{
    if (!ucx_clock_is_a_call()) {
        GTEST_SKIP() << "UCX reads the TSC on this host: its clock read is no call";
    }
    uct_side c, d;
    unsigned got = 0;
    uct_ep_h ep  = connected_pair(c, d, {{"ACK_DELAY", "20s"}, {"RTO", "30s"},
                                         {"RTO_MAX", "40s"}, {"TIMEOUT", "60s"}}, &got);
    ASSERT_NE(nullptr, ep);
    constexpr unsigned calls = 1600;
    auto reads_in_idle_calls = [&](uct_side &s) {
        unsigned long before = clock_reads();
        unsigned found       = 0;
        for (unsigned i = 0; i < calls; ++i) {
            found += uct_worker_progress(s.worker);
        }
        EXPECT_EQ(0u, found) << "the calls were to find nothing";
        return clock_reads() - before;
    };
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 0, nullptr, 0));
    // c's packet is unacknowledged: d has not progressed since.
    EXPECT_LE(reads_in_idle_calls(c), calls / 8) << "sender, a packet unacknowledged";
    ASSERT_TRUE(run_until({&d}, [&] { return got == 1; }));
    // d owes the acknowledgement for ACK_DELAY.
    EXPECT_LE(reads_in_idle_calls(d), calls / 8) << "receiver, an acknowledgement owed";
    uct_ep_destroy(ep);
    close_side(d);
    close_side(c);
}

/// A new endpoint's connection request leaves at once, not at its first
/// retransmission timeout (RTO 400 ms here: a request that waited for its
/// timer is counted as resent).
TEST_P(timers, a_connection_request_leaves_at_once)
{
    uct_side c;
    open_side(c, {{"RTO", "400ms"}});
    uct_ep_h ep = create_ep(c, m_b);
    ASSERT_NE(nullptr, ep);
    EXPECT_TRUE(run_until({&c, &m_b}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; },
                          30));
    EXPECT_EQ(0u, rd::to_rd(c.iface)->resent)
            << "the connection request went only when its timer expired";
    uct_ep_destroy(ep);
    close_side(c);
}

ZV_INSTANTIATE(timers, ZV_TLS_RD);


/// An endpoint destroyed right after its sends were posted (unsignaled,
/// unacknowledged): its buffers are not handed out again while the QP may
/// still read them, so another endpoint's packets reach the peer intact,
/// and the destroyed one's are delivered at most once.
TEST_P(graveyard, an_endpoint_destroyed_with_sends_queued_reuses_no_buffer_still_posted)
{
    constexpr uint8_t other_id = am_id + 1;
    ordered_sink sink; // the steady endpoint's stream
    am_values gone;    // the destroyed endpoints' packets
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, ordered_sink::handler,
                                               &sink, 0));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, other_id, am_values::handler,
                                               &gone, 0));
    const size_t max = m_a.attr.cap.am.max_bcopy;
    // (Not connect(): these endpoints are destroyed here, not at teardown.)
    auto connected = [&] {
        uct_ep_h ep = create_ep(m_a, m_b);
        EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
        return ep;
    };
    uct_ep_h steady = connected();
    ASSERT_NE(nullptr, steady);
    std::vector<char> payload(max - sizeof(uint32_t), 0x5a);
    unsigned sent = 0, next = 0;
    for (unsigned round = 0; round < 20; ++round) {
        uct_ep_h brief = connected();
        ASSERT_NE(nullptr, brief);
        for (unsigned i = 0; i < 8; ++i) {
            pack_arg a{payload.data(), payload.size()};
            if (uct_ep_am_bcopy(brief, other_id, pack_cb, &a, 0) >= 0) {
                ++sent;
            }
        }
        uct_ep_destroy(brief); // its packets still queued, none acknowledged
        if (round == 0) {
            // Its buffers stay out of the pool (and it stays, in the
            // graveyard) until the QP is known to have read them.
            EXPECT_EQ(1u, rd::to_rd(m_a.iface)->graveyard.size())
                    << "a destroyed endpoint's unacknowledged buffers went back at once";
        }
        // The steady endpoint's packets take the buffers released next.
        for (unsigned end = next + 40; next < end;) {
            msg_pack m{next, (next * 37) % (max - sizeof(uint32_t))};
            ssize_t r = uct_ep_am_bcopy(steady, am_id, pack_msg, &m, 0);
            if (r >= 0) {
                ++next;
            } else {
                ASSERT_EQ(UCS_ERR_NO_RESOURCE, r);
                progress();
            }
        }
    }
    ASSERT_TRUE(wait_for([&] { return uct_ep_flush(steady, 0, nullptr) == UCS_OK; }));
    ASSERT_TRUE(wait_for([&] { return sink.next == next; })) << sink.next << " of " << next;
    EXPECT_EQ(0u, sink.bad) << sink.first_error;
    EXPECT_LE(gone.got.size(), sent) << "a destroyed endpoint's packet arrived twice";
    uct_ep_destroy(steady);
}

/// The same with nothing sent after it, not even the DISC (as when the send
/// queue had no room for it): the interface itself makes a completion come
/// (a signaled resend), so that the destroyed endpoint is freed and not
/// kept for as long as the interface is quiet.
TEST_P(graveyard, an_endpoint_destroyed_with_sends_queued_is_freed_on_a_quiet_interface)
{
    am_values gone;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &gone, 0));
    uct_ep_h ep = create_ep(m_a, m_b);
    ASSERT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    for (uint64_t v = 0; v < 4; ++v) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, v, nullptr, 0));
    }
    if (is_uc()) {
        uct_ep_destroy(ep); // (uc_zv sends nothing when an endpoint goes)
    } else {
        rd::ep_release(rd::to_ep(ep)); // ud_zv's ep_destroy without its DISC
    }
    const rd::rd_iface &a = *rd::to_rd(m_a.iface);
    EXPECT_TRUE(wait_for([&] { return a.graveyard.empty(); }, 5))
            << a.graveyard.size() << " destroyed endpoint(s) kept";
    EXPECT_LE(gone.got.size(), 4u) << "a packet arrived twice";
}

ZV_INSTANTIATE(graveyard, ZV_TLS_RD);


TEST_P(reclaim, a_vanished_peer_leaves_no_receive_connection)
{
    uct_side c, d;
    am_values sink;
    uct_ep_h ep = delivering_pair(c, {}, d, {{"TIMEOUT", "1s"}}, sink);
    ASSERT_NE(nullptr, ep);
    ud::ud_iface *di = ud::to_ud(d.iface);
    ASSERT_EQ(1u, di->super.conns.count());
    // As a killed process: the interface goes with its endpoint, no DISC.
    close_side(c);
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(run_until({&d}, [&] { return di->super.conns.count() == 0; }, 10))
            << "the receive connection stayed";
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(took, 1.5); // probed after one TIMEOUT of silence, freed after two
    EXPECT_LE(took, 3.5);
    EXPECT_EQ(1u, di->super.reclaimed);
    close_side(d);
}

TEST_P(reclaim, a_peer_back_after_its_connection_was_reclaimed_loses_nothing)
{
    // As a rank that stops progressing for longer than the receiver's
    // reclaim time, with nothing outstanding and nothing to answer for it
    // (UCS_ASYNC_MODE_POLL: no async thread; a stopped process): when it
    // sends again its stream goes on where it left it, each message once
    // and in order.
    uct_side c, d;
    open_side(c, {}, UCS_ASYNC_MODE_POLL);
    open_side(d, {{"TIMEOUT", "1s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    auto send = [&](uint64_t v) {
        return run_until({&c, &d}, [&] {
            return uct_ep_am_short(ep, am_id, v, nullptr, 0) == UCS_OK;
        }, 10);
    };
    for (uint64_t v = 0; v < 10; ++v) {
        ASSERT_TRUE(send(v));
    }
    ASSERT_TRUE(run_until({&c, &d}, [&] {
        return (sink.got.size() == 10) && (uct_ep_flush(ep, 0, nullptr) == UCS_OK);
    }, 10));
    ud::ud_iface *di = ud::to_ud(d.iface);
    // c "computes": only d progresses, past its two TIMEOUTs of silence.
    ASSERT_TRUE(run_until({&d}, [&] { return di->super.reclaimed == 1; }, 10))
            << "the silent connection was not reclaimed";
    EXPECT_EQ(0u, di->super.conns.count());
    for (uint64_t v = 10; v < 20; ++v) {
        ASSERT_TRUE(send(v));
    }
    EXPECT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() >= 20; }, 10))
            << "after the reclaim: " << sink.got.size() << " of 20 delivered";
    EXPECT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    run_until({&c, &d}, [] { return false; }, 0.2); // anything delivered twice shows now
    std::vector<uint64_t> want(20);
    for (uint64_t v = 0; v < 20; ++v) {
        want[v] = v;
    }
    EXPECT_EQ(want, sink.got) << "each message once, in order";
    EXPECT_EQ(1u, di->revived);
    EXPECT_EQ(1u, di->super.conns.count());
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

ZV_INSTANTIATE(reclaim, "ud_zv");


TEST_P(one_packet, caps_messages_at_one_packet_when_on)
{
    uct_side on, off, dflt;
    open_side(on, {{"ONE_PACKET", "on"}});
    open_side(off, {{"ONE_PACKET", "off"}, {"SEG_SIZE", "8k"}, {"MAX_WRITE", "16k"}});
    open_side(dflt);
    const size_t mtu = on.attr.cap.put.align_mtu;
    ASSERT_GE(mtu, 256u);
    EXPECT_LE(on.attr.cap.put.max_zcopy, mtu);
    EXPECT_LE(on.attr.cap.am.max_bcopy + 16, mtu); // + the zv header
    EXPECT_GE(on.attr.cap.am.max_bcopy, mtu - 64);
    EXPECT_EQ(16384u, off.attr.cap.put.max_zcopy);
    EXPECT_EQ(8192u, off.attr.cap.am.max_bcopy);
    const bool rxe = (m_dev.rfind("rxe", 0) == 0);
    const uct_side &want = rxe ? on : off;
    EXPECT_EQ(want.attr.cap.am.max_bcopy, dflt.attr.cap.am.max_bcopy) << m_dev;
    EXPECT_EQ(want.attr.cap.put.max_zcopy, dflt.attr.cap.put.max_zcopy) << m_dev;

    // Messages of the largest size each mode allows arrive whole, in order.
    for (uct_side *s : {&on, &off}) {
        ordered_sink sink;
        uct_side peer;
        open_side(peer, {{"ONE_PACKET", s == &on ? "on" : "off"}});
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(peer.iface, am_id, ordered_sink::handler,
                                                   &sink, 0));
        uct_ep_h ep = create_ep(*s, peer);
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(run_until({s, &peer}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
        ASSERT_TRUE(send_ordered(ep, 200, s->attr.cap.am.max_bcopy, {s, &peer}));
        ASSERT_TRUE(run_until({s, &peer}, [&] { return sink.next >= 200; }))
                << "delivered " << sink.next << " of 200";
        EXPECT_EQ(200u, sink.next) << sink.first_error;
        EXPECT_EQ(0u, sink.bad) << sink.first_error;
        uct_ep_destroy(ep);
        close_side(peer);
    }
    close_side(on);
    close_side(off);
    close_side(dflt);
}

ZV_INSTANTIATE(one_packet, "uc_zv");

} // namespace zv::test
