// SPDX-License-Identifier: BSD-3-Clause
// rc_zv's receive side: the shared receive queue (its limit event, a
// receiver not ready), event arming, and an AM handler that progresses its
// own worker.
#include "tl_fixture.h"

#include "rc/rc_iface.h"
#include "rd/rd_iface.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace zv::test {

namespace {

/// rc_zv's shared receive queue.
class srq : public tl_test {};

/// Arming the interface's events (the transports that have them: ud_zv and
/// uc_zv advertise none, their resends need progress).
class wakeup : public tl_test {
protected:
    uint64_t needs_events() const override { return UCT_IFACE_FLAG_EVENT_RECV; }
};

/// Progress called from inside progress (white-box: rc_iface::in_progress,
/// rd_iface::in_progress: the depth of progress calls for ud_zv and uc_zv).
class nested_progress : public tl_test {
protected:
    /// The interface holds its frees for a progress call under way.
    static bool in_progress(uct_iface_h iface, bool rd)
    {
        return rd ? (rd::to_rd(iface)->in_progress != 0) : rc::to_rc(iface)->in_progress;
    }
};

} // namespace

// A burst that arrives while the receiver does not progress takes rc_zv's
// SRQ below its armed limit (a quarter of RX_QUEUE_LEN): the device's
// SRQ-limit event makes the receiver handle what arrived and refill at
// once, and nothing is lost.

TEST_P(srq, a_burst_below_the_limit_refills_the_srq)
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

TEST_P(srq, receiver_not_ready_loses_nothing)
{
    // A receiver with 16 receive buffers that does not progress while the
    // sender posts 300 messages: the device retries (RNR) until buffers are
    // re-posted; nothing is lost, duplicated or reordered, nothing hangs.
    uct_side c;
    open_side(c, {{"RX_QUEUE_LEN", "16"}, {"RX_BATCH", "4"}});
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(c.iface, 9, am_sink::handler, &sink, 0));
    uct_ep_params_t params = {};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = m_a.iface;
    params.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(c.dev_addr.data());
    params.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(c.iface_addr.data());
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, uct_ep_create(&params, &ep));
    auto both = [&] { uct_worker_progress(m_a.worker); return uct_worker_progress(c.worker); };
    auto start = std::chrono::steady_clock::now();
    while (uct_ep_flush(ep, 0, nullptr) != UCS_OK) {
        both();
        ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    }
    const unsigned count = 300;
    std::vector<uint8_t> src(1000);
    unsigned sent = 0;
    start = std::chrono::steady_clock::now();
    while (sent < count) { // only the sender progresses
        fill(src.data(), src.size(), sent);
        pack_arg arg{src.data(), src.size()};
        ssize_t len = uct_ep_am_bcopy(ep, 9, pack_cb, &arg, 0);
        if (len == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_a.worker);
            if (std::chrono::steady_clock::now() - start > std::chrono::seconds(2)) {
                break; // the receiver must now drain to make room
            }
            continue;
        }
        ASSERT_EQ(static_cast<ssize_t>(src.size()), len);
        ++sent;
    }
    start = std::chrono::steady_clock::now();
    while ((sink.messages.size() < count) || (sent < count)) {
        both();
        if (sent < count) {
            fill(src.data(), src.size(), sent);
            pack_arg arg{src.data(), src.size()};
            ssize_t len = uct_ep_am_bcopy(ep, 9, pack_cb, &arg, 0);
            if (len >= 0) {
                ++sent;
            }
        }
        ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60))
                << sink.messages.size() << " of " << count << " delivered";
    }
    for (unsigned i = 0; i < count; ++i) {
        ASSERT_EQ(src.size(), sink.messages[i].size());
        ASSERT_TRUE(check(sink.messages[i].data(), src.size(), i)) << "message " << i;
    }
    uct_ep_destroy(ep);
    close_side(c);
}

/// Messages that event_arm() finds while it arms the completion queues
/// (the caller is told to progress instead of sleeping) are delivered by
/// the next progress call, all of them, once, in order.
TEST_P(wakeup, messages_found_while_arming_events_are_delivered_by_the_next_progress)
{
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, 5, am_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    ASSERT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    const size_t before = sink.messages.size();
    std::vector<uint8_t> src(200);
    for (unsigned i = 0; i < 3; ++i) {
        fill(src.data(), src.size(), 40 + i);
        pack_arg arg{src.data(), src.size()};
        ASSERT_EQ(static_cast<ssize_t>(src.size()), uct_ep_am_bcopy(ep, 5, pack_cb, &arg, 0));
    }
    // Only the sender progresses: once its flush completes, the device
    // acknowledged every message, and they wait in the receiver's queue.
    auto start = std::chrono::steady_clock::now();
    while (uct_ep_flush(ep, 0, nullptr) != UCS_OK) {
        uct_worker_progress(m_a.worker);
        ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    }
    ASSERT_EQ(before, sink.messages.size());
    EXPECT_EQ(UCS_ERR_BUSY, uct_iface_event_arm(m_b.iface, UCT_EVENT_RECV));
    EXPECT_EQ(3u, uct_worker_progress(m_b.worker));
    ASSERT_EQ(before + 3, sink.messages.size());
    for (unsigned i = 0; i < 3; ++i) {
        EXPECT_TRUE(check(sink.messages[before + i].data(), src.size(), 40 + i)) << i;
    }
}

/// An active-message handler that progresses its own worker: the inner
/// call delivers what is there and leaves the outer call in charge (an
/// endpoint destroyed by a later callback of the outer call is freed only
/// when it returns: the interface still counts itself in progress).
TEST_P(nested_progress, a_handler_that_progresses_its_worker_leaves_the_outer_call_in_charge)
{
    struct nesting {
        uct_worker_h       worker;
        uct_iface_h        iface;
        bool               rd;
        std::vector<unsigned> order;
        bool               still_in_progress = true;
        static ucs_status_t handler(void *arg, void *data, size_t, unsigned)
        {
            auto *self = static_cast<nesting *>(arg);
            uint64_t seq; // the message is its 8-byte header
            std::memcpy(&seq, data, sizeof(seq));
            self->order.push_back(static_cast<unsigned>(seq));
            if (seq == 0) {
                uct_worker_progress(self->worker); // nested
                self->still_in_progress = self->still_in_progress && in_progress(self->iface, self->rd);
            }
            return UCS_OK;
        }
    } n{m_b.worker, m_b.iface, is_rd()};
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, 6, nesting::handler, &n, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    for (uint64_t seq = 0; seq < 4; ++seq) {
        ucs_status_t st;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(ep, 6, seq, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_OK, st);
    }
    ASSERT_TRUE(wait_for([&] { return n.order.size() == 4; })) << n.order.size();
    EXPECT_EQ((std::vector<unsigned>{0, 1, 2, 3}), n.order);
    EXPECT_TRUE(n.still_in_progress);
    EXPECT_FALSE(in_progress(m_b.iface, is_rd()));
}

ZV_INSTANTIATE(srq, ZV_TLS_RC);
ZV_INSTANTIATE(wakeup, ZV_TLS_RC);
ZV_INSTANTIATE(nested_progress, ZV_TLS_ALL);

} // namespace zv::test
