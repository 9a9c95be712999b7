// SPDX-License-Identifier: BSD-3-Clause
// ud_zv and uc_zv (the software-reliable transports) at the UCT level:
// active messages exactly once and in order (also under injected loss,
// duplication and reordering), uc_zv's puts, pending, flush, many
// endpoints, and a dead peer becoming an endpoint error in bounded time.
#include "clock_reads.h"
#include "test_util.h"
#include "uct_fixture.h"
#include "log_guard.h"

#include "uc/uc_iface.h"
#include "ud/ud_iface.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 11;

/// Parameterised by transport name (and, for ud_zv_faults, a fault spec).
class sw_rel : public uct_test {
protected:
    virtual std::string tl() const = 0;
    const char *tl_name() const override
    {
        m_tl = tl();
        return m_tl.c_str();
    }
    bool is_uc() const { return tl() == "uc_zv"; }
    mutable std::string m_tl;

    /// An AM handler that counts into the unsigned at 'arg'.
    static ucs_status_t count_am(void *arg, void *, size_t, unsigned)
    {
        ++*static_cast<unsigned *>(arg);
        return UCS_OK;
    }

    /// Interfaces c and d opened with 'cfg', d counting its messages into
    /// 'got', and a connected endpoint of c to d (null on failure, which
    /// is reported).
    uct_ep_h connected_pair(uct_side &c, uct_side &d,
                            const std::vector<std::pair<const char *, const char *>> &cfg,
                            unsigned *got)
    {
        open_side(c, cfg);
        open_side(d, cfg);
        EXPECT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, count_am, got, 0));
        uct_ep_h ep = create_ep(c, d);
        if (!run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; })) {
            ADD_FAILURE() << "the endpoint did not connect";
            uct_ep_destroy(ep);
            return nullptr;
        }
        return ep;
    }

};

/// Each message: [uint32 index][pattern seeded by index]; the receiver
/// checks order, count and content.
struct ordered_sink {
    unsigned next  = 0;
    unsigned bad   = 0;
    std::string first_error;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
    {
        auto *self = static_cast<ordered_sink *>(arg);
        uint32_t index;
        if (length < sizeof(index)) {
            self->note("short message");
            return UCS_OK;
        }
        std::memcpy(&index, data, sizeof(index));
        if (index != self->next) {
            self->note("message " + std::to_string(index) + " arrived, expected " +
                       std::to_string(self->next));
        } else if (!check(static_cast<char *>(data) + sizeof(index),
                          length - sizeof(index), index)) {
            self->note("message " + std::to_string(index) + " has wrong data");
        }
        self->next = index + 1;
        return UCS_OK;
    }
    void note(const std::string &what)
    {
        if (bad++ == 0) {
            first_error = what;
        }
    }
};

struct msg_pack {
    uint32_t index;
    size_t   length; // payload after the index
};

size_t pack_msg(void *dest, void *arg)
{
    auto *m = static_cast<msg_pack *>(arg);
    std::memcpy(dest, &m->index, sizeof(m->index));
    fill(static_cast<char *>(dest) + sizeof(m->index), m->length, m->index);
    return sizeof(m->index) + m->length;
}

/// A send of message 'i' did not go: progress 'sides' if the endpoint had
/// no resources; any other status is a failure (false).
bool refused(ucs_status_t status, uint64_t i, const std::vector<uct_side *> &sides)
{
    if (status != UCS_ERR_NO_RESOURCE) {
        ADD_FAILURE() << "send " << i << ": " << ucs_status_string(status);
        return false;
    }
    for (uct_side *s : sides) {
        uct_worker_progress(s->worker);
    }
    return true;
}

/// Send 'count' messages of varying size from 'ep' (bcopy, short every
/// third); returns false if the sender got stuck.
bool send_ordered(uct_ep_h ep, unsigned count, size_t max_payload,
                  const std::vector<uct_side *> &sides, double timeout = 120)
{
    auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < count;) {
        size_t len = (i * 37) % (max_payload - sizeof(uint32_t) + 1);
        ucs_status_t status;
        if ((i % 3 == 0) && (len <= 48)) {
            std::vector<char> buf(sizeof(uint32_t) + len);
            msg_pack m{i, len};
            pack_msg(buf.data(), &m);
            uint64_t hdr;
            std::memcpy(&hdr, buf.data(), std::min<size_t>(8, buf.size()));
            // am_short's 8-byte header carries the first 8 bytes.
            status = (buf.size() >= 8) ?
                     uct_ep_am_short(ep, am_id, hdr, buf.data() + 8,
                                     static_cast<unsigned>(buf.size() - 8)) :
                     UCS_ERR_UNSUPPORTED;
            if (status == UCS_ERR_UNSUPPORTED) {
                msg_pack m2{i, len};
                ssize_t r = uct_ep_am_bcopy(ep, am_id, pack_msg, &m2, 0);
                status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
            }
        } else {
            msg_pack m{i, len};
            ssize_t r = uct_ep_am_bcopy(ep, am_id, pack_msg, &m, 0);
            status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
        }
        if (status == UCS_OK) {
            ++i;
            continue;
        }
        if (!refused(status, i, sides)) {
            return false;
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout)) {
            ADD_FAILURE() << "sender stuck at message " << i;
            return false;
        }
    }
    return true;
}

class ud_zv : public sw_rel, public ::testing::WithParamInterface<const char *> {
protected:
    std::string tl() const override { return GetParam(); }
};

TEST_P(ud_zv, advertises_what_it_implements)
{
    const uint64_t f = m_a.attr.cap.flags;
    EXPECT_TRUE(f & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_SHORT);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_BCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_ZCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_PENDING);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE);
    // UD has no RDMA; UC has RDMA WRITE only: no reads, no atomics.
    const uint64_t put = UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                         UCT_IFACE_FLAG_PUT_ZCOPY;
    EXPECT_EQ(is_uc() ? put : 0, f & put);
    EXPECT_FALSE(f & (UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                      UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_ATOMIC_DEVICE));
    EXPECT_EQ(0u, m_a.attr.ep_addr_len);
    EXPECT_EQ(3u, m_a.attr.iface_addr_len);
    EXPECT_EQ(0u, m_a.attr.cap.event_flags); // retransmission needs progress
    EXPECT_GE(m_a.attr.cap.am.max_bcopy, 256u);
}

TEST_P(ud_zv, am_short_bcopy_zcopy_exactly_once_in_order)
{
    ordered_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, ordered_sink::handler,
                                               &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const size_t max = m_a.attr.cap.am.max_bcopy;
    ASSERT_TRUE(send_ordered(ep, 600, max, {&m_a, &m_b}));

    // zcopy from registered memory, header + two iov entries.
    region r = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ);
    for (unsigned i = 600; i < 700; ++i) {
        size_t len = 8 + (i * 53) % (max - 64);
        msg_pack m{i, len};
        std::vector<char> whole(sizeof(uint32_t) + len);
        pack_msg(whole.data(), &m);
        const size_t hdr_len = 16, first = (whole.size() - hdr_len) / 2;
        std::memcpy(r.addr, whole.data() + hdr_len, whole.size() - hdr_len);
        uct_iov_t iov[2] = {{r.addr, first, r.memh, 0, 1},
                            {static_cast<char *>(r.addr) + first,
                             whole.size() - hdr_len - first, r.memh, 0, 1}};
        counting_comp comp;
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_am_zcopy(ep, am_id, whole.data(), hdr_len, iov, 2, 0,
                                     &comp.super);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_TRUE(UCS_STATUS_IS_ERR(status) == false) << ucs_status_string(status);
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait_for([&] { return comp.done == 1; }));
        }
        EXPECT_EQ(UCS_OK, comp.status);
    }
    ASSERT_TRUE(wait_for([&] { return sink.next == 700; })) << "got " << sink.next;
    EXPECT_EQ(0u, sink.bad) << sink.first_error;
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    dereg(r);
}

/// Injected faults on both sides' receive paths (data one way, acks the
/// other): every message exactly once, in order, data checked.
class ud_zv_faults
    : public sw_rel,
      public ::testing::WithParamInterface<std::tuple<const char *, const char *>> {
protected:
    std::string tl() const override { return std::get<0>(GetParam()); }
};

TEST_P(ud_zv_faults, every_message_exactly_once_in_order)
{
    // "drop,dup,reorder" rates
    std::string spec = std::get<1>(GetParam());
    std::string rates[3];
    for (int i = 0, pos = 0; i < 3; ++i) {
        size_t comma = spec.find(',', pos);
        rates[i]     = spec.substr(pos, comma - pos);
        pos          = static_cast<int>(comma + 1);
    }
    for (const char *seed : {"7", "1234"}) {
        SCOPED_TRACE(std::string("faults ") + spec + " seed " + seed);
        uct_side c, d;
        const std::vector<std::pair<const char *, const char *>> cfg = {
            {"FAULT_DROP", rates[0].c_str()}, {"FAULT_DUP", rates[1].c_str()},
            {"FAULT_REORDER", rates[2].c_str()}, {"FAULT_SEED", seed},
            {"RTO", "5ms"}, {"WINDOW", "64"}};
        open_side(c, cfg);
        open_side(d, cfg);
        ordered_sink sink;
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, ordered_sink::handler,
                                                   &sink, 0));
        uct_ep_h ep = create_ep(c, d);
        ASSERT_NE(nullptr, ep);
        const unsigned count = 1500;
        ASSERT_TRUE(send_ordered(ep, count, c.attr.cap.am.max_bcopy, {&c, &d}));
        ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.next >= count; }))
                << "delivered " << sink.next << " of " << count;
        ASSERT_TRUE(run_until({&c, &d}, [&] {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        })) << "flush never completed";
        // Nothing more arrives after everything was acknowledged.
        run_until({&c, &d}, [] { return false; }, 0.05);
        EXPECT_EQ(count, sink.next);
        EXPECT_EQ(0u, sink.bad) << sink.first_error;
        EXPECT_EQ(0u, s_ep_errors);
        uct_ep_destroy(ep);
        close_side(c);
        close_side(d);
    }
}

INSTANTIATE_TEST_SUITE_P(loss, ud_zv_faults,
                         ::testing::Combine(::testing::Values("ud_zv", "uc_zv"),
                                            ::testing::Values("0.01,0,0", "0.05,0,0",
                                                              "0,0.05,0", "0,0,0.05",
                                                              "0.01,0.01,0.01",
                                                              "0.05,0.05,0.05")));

/// What a new endpoint sent before its connection existed leaves when the
/// connection does, even while its worker computes: the async side
/// completes the connection and posts it (a rank that sends and then
/// computes is not the one its peer waits for). (rc_zv's go at its
/// worker's next progress: its send path does not take the async gate.)
TEST_P(ud_zv, what_a_new_endpoint_sent_arrives_while_its_worker_computes)
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

/// A new endpoint's connection request leaves at once, not at its first
/// retransmission timeout (RTO 400 ms here: a request that waited for its
/// timer is counted as resent).
TEST_P(ud_zv, a_connection_request_leaves_at_once)
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

TEST_P(ud_zv, pending_when_the_window_is_full_then_flush)
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

TEST_P(ud_zv, many_endpoints_in_one_process)
{
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_sink::handler, &sink, 0));
    const unsigned count = 256;
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < count; ++i) {
        eps.push_back(create_ep(m_a, m_b));
    }
    for (unsigned i = 0; i < count; ++i) {
        uint32_t v = i;
        ASSERT_TRUE(wait_for([&] {
            return uct_ep_am_short(eps[i], am_id, v, nullptr, 0) == UCS_OK;
        })) << "endpoint " << i;
    }
    ASSERT_TRUE(wait_for([&] { return sink.messages.size() == count; }));
    std::vector<bool> seen(count);
    for (auto &m : sink.messages) {
        uint64_t v;
        ASSERT_EQ(sizeof(v), m.size());
        std::memcpy(&v, m.data(), sizeof(v));
        ASSERT_LT(v, count);
        EXPECT_FALSE(seen[v]) << "duplicate from endpoint " << v;
        seen[v] = true;
    }
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
}

TEST_P(ud_zv, dead_peer_is_an_endpoint_error_in_bounded_time)
{
    uct_side c, d;
    open_side(c, {{"TIMEOUT", "2s"}, {"RTO", "10ms"}, {"RTO_MAX", "200ms"}});
    open_side(d);
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    close_side(d); // the peer is gone: nothing acknowledges any more
    region r = reg(512, UCT_MD_MEM_ACCESS_LOCAL_READ);
    uct_iov_t iov = {r.addr, 512, r.memh, 0, 1};
    counting_comp comp;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0, &comp.super));
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 10));
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(took, 1.9);
    EXPECT_LE(took, 2.0 + 0.2 + 1.0); // TIMEOUT + RTO_MAX + slack
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error);
    ASSERT_TRUE(run_until({&c}, [&] { return comp.done == 1; }, 5));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, comp.status);
    EXPECT_EQ(1u, s_ep_errors);
    // Further sends report the error instead of queueing forever.
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_am_short(ep, am_id, 0, nullptr, 0));
    uct_ep_destroy(ep);
    dereg(r);
    close_side(c);
}

/// Nobody waits for a delayed ack: a zero-copy send's completion (and on
/// uc_zv a put's) and a flush come back within round trips, not after
/// ACK_DELAY, set to 2 s here so that one that waited for it fails.
TEST_P(ud_zv, completions_and_flush_do_not_wait_for_the_delayed_ack)
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
TEST_P(ud_zv, an_idle_progress_call_reads_no_clock)
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

/// Fault injection takes a progress function of its own, chosen when the
/// interface opens (without it the receive path does not look at it): an
/// interface told to drop every packet receives nothing, beside one that
/// receives everything, from the same sender.
TEST_P(ud_zv, fault_injection_reaches_the_receive_path_of_its_interface)
{
    uct_side c, clean, lossy;
    open_side(c);
    open_side(clean);
    open_side(lossy, {{"FAULT_DROP", "1"}});
    unsigned got_clean = 0, got_lossy = 0;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(clean.iface, am_id, count_am, &got_clean, 0));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(lossy.iface, am_id, count_am, &got_lossy, 0));
    uct_ep_h to_clean = create_ep(c, clean);
    uct_ep_h to_lossy = create_ep(c, lossy);
    ASSERT_NE(nullptr, to_clean);
    ASSERT_NE(nullptr, to_lossy);
    const std::vector<uct_side *> all = {&c, &clean, &lossy};
    // The lossy side drops the connection traffic as well (ud_zv), so its
    // endpoint may never take a message: try for a while, and count.
    unsigned sent_clean = 0, sent_lossy = 0;
    run_until(all, [&] {
        if ((sent_clean < 5) && (uct_ep_am_short(to_clean, am_id, 0, nullptr, 0) == UCS_OK)) {
            ++sent_clean;
        }
        if ((sent_lossy < 5) && (uct_ep_am_short(to_lossy, am_id, 0, nullptr, 0) == UCS_OK)) {
            ++sent_lossy;
        }
        return false;
    }, 0.5);
    EXPECT_EQ(5u, sent_clean);
    EXPECT_TRUE(run_until(all, [&] { return got_clean == 5; }, 10)) << got_clean;
    run_until(all, [] { return false; }, 0.2);
    EXPECT_EQ(0u, got_lossy) << "of " << sent_lossy << " sent to the interface dropping all";
    uct_ep_destroy(to_lossy);
    uct_ep_destroy(to_clean);
    close_side(lossy);
    close_side(clean);
    close_side(c);
}

TEST_P(ud_zv, unanswered_connection_request_times_out)
{
    uct_side c, d;
    open_side(c, {{is_uc() ? "CONN_TIMEOUT" : "TIMEOUT", "1s"}, {"RTO", "10ms"},
                  {"RTO_MAX", "100ms"}});
    open_side(d);
    std::vector<char> dev = d.dev_addr, addr = d.iface_addr;
    close_side(d); // an address nobody answers at
    d.dev_addr   = dev;
    d.iface_addr = addr;
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 10));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_flush(ep, 0, nullptr));
    uct_ep_destroy(ep);
    close_side(c);
}

/// Send n active messages on ep and wait until 'to' counted them.
bool deliver(uct_ep_h ep, unsigned n, am_values &to, std::vector<uct_side *> sides)
{
    const size_t want = to.got.size() + n;
    for (unsigned i = 0; i < n;) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, i, nullptr, 0);
        if (st == UCS_OK) {
            ++i;
        } else if (st == UCS_ERR_NO_RESOURCE) {
            for (uct_side *s : sides) {
                uct_worker_progress(s->worker);
            }
        } else {
            ADD_FAILURE() << "send " << i << ": " << ucs_status_string(st);
            return false;
        }
    }
    auto start = std::chrono::steady_clock::now();
    while (to.got.size() < want) {
        for (uct_side *s : sides) {
            uct_worker_progress(s->worker);
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
            return false;
        }
    }
    return to.got.size() == want;
}

TEST_P(ud_zv, an_idle_peer_that_progresses_keeps_its_connection)
{
    // The receiving side probes what has been silent for a TIMEOUT (uc_zv:
    // its unused QP, every CONN_TIMEOUT) and frees it when the probe goes
    // unanswered: a live endpoint answers, however long it stays silent.
    const char *t = is_uc() ? "CONN_TIMEOUT" : "TIMEOUT";
    uct_side c, d;
    open_side(c, {{t, "1s"}});
    open_side(d, {{t, "1s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d}));
    run_until({&c, &d}, [] { return false; }, 4.0); // four TIMEOUTs of silence
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d})) << "after 4 s idle: " << sink.got.size();
    EXPECT_EQ(0u, s_ep_errors);
    if (is_uc()) {
        EXPECT_EQ(0u, uc::to_uc(d.iface)->conn.reclaimed());
    } else {
        ud::ud_iface *di = ud::to_ud(d.iface);
        EXPECT_EQ(0u, di->super.reclaimed);
        EXPECT_EQ(1u, di->super.conns.count());
        EXPECT_GE(di->probed, 2u) << "the silent connection was not probed";
    }
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

/// A rank that computes (no progress) while its peer sends to it: its
/// async side accepts and acknowledges, so the sender keeps its endpoint
/// past the peer timeout, and the worker's next progress call hands every
/// message to UCP, once and in order - none from the async thread.
TEST_P(ud_zv, a_computing_receiver_keeps_its_peer_and_loses_nothing)
{
    // (TIMEOUT 3 s: a loaded host can hold a VM's async thread for a
    // second; the point is a compute phase longer than the timeout.)
    uct_side c, d;
    open_side(c, {{"TIMEOUT", "3s"}});
    open_side(d, {{"TIMEOUT", "3s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d}));
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
    rd::rd_iface *dr = rd::to_rd(d.iface);
    EXPECT_GT(dr->as.runs, 0u) << "d's async side never ran";
    EXPECT_EQ(100u, dr->as.ams) << "d's async side accepted what it had room for: all";
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

/// An interface with nothing outstanding, whose worker computes, arms no
/// timer (the async thread does nothing for it), and still answers at once
/// when a peer sends: the packet's completion wakes it.
TEST_P(ud_zv, an_idle_interface_sleeps_while_its_worker_computes_and_a_packet_wakes_it)
{
    uct_side c, d;
    open_side(c, {{"TIMEOUT", "3s"}});
    open_side(d, {{"TIMEOUT", "3s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d}));
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

/// A device event for side's port (white-box: what the md's event
/// handler hands the interface).
void port_event(const uct_side &side, verbs::async_event::kind what)
{
    rd::rd_iface *r = rd::to_rd(side.iface);
    verbs::async_event ev;
    ev.what     = what;
    ev.port_num = r->super.port->port_num;
    rd::handle_event(&r->super, ev);
}

/// The interface's own port goes down: its peers' silence is explained, so
/// its endpoints neither send nor time out (a port flap longer than
/// TIMEOUT is ridden out); when the port is back, what waited goes out.
/// A port that stays down for 3 x TIMEOUT fails the endpoints, naming it.
TEST_P(ud_zv, a_port_down_holds_the_endpoints_and_a_port_that_stays_down_fails_them)
{
    uct_side c, d;
    open_side(c, {{"TIMEOUT", "1s"}});
    open_side(d, {{"TIMEOUT", "1s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d}));
    port_event(c, verbs::async_event::kind::port_down);
    // 2 x TIMEOUT: nothing can be sent, nothing fails.
    ucs_status_t last = UCS_OK;
    run_until({&c, &d}, [&] {
        last = uct_ep_am_short(ep, am_id, 10, nullptr, 0);
        return last == UCS_OK;
    }, 2.0);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, last) << "sent while the port is down";
    EXPECT_EQ(0u, s_ep_errors) << "an endpoint timed out while its own port was down";
    port_event(c, verbs::async_event::kind::port_up);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d})) << "nothing goes out after the port is back";
    EXPECT_EQ(0u, s_ep_errors);
    // Down for good: after 3 x TIMEOUT, the endpoint fails.
    {
        expect_log_problems expect;
        port_event(c, verbs::async_event::kind::port_down);
        run_until({&c, &d}, [&] { return s_ep_errors > 0; }, 6.0);
        EXPECT_EQ(1u, s_ep_errors) << "a port down for good never ended its endpoints";
        EXPECT_TRUE(logged_only(expect, "its port has been down")) << expect.text();
    }
    uct_ep_destroy(ep);
}

/// Post am_shorts with headers next, next+1, ... up to 'end' (excluded),
/// progressing 'sides' while the endpoint has no resources; stops after
/// 'timeout' s. Returns false on an error.
bool send_values(uct_ep_h ep, uint64_t &next, uint64_t end, const std::vector<uct_side *> &sides,
                 double timeout)
{
    auto start = std::chrono::steady_clock::now();
    while (next < end) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, next, nullptr, 0);
        if (st == UCS_OK) {
            ++next;
            continue;
        }
        if (!refused(st, next, sides)) {
            return false;
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            timeout) {
            break;
        }
    }
    return true;
}

/// A QP that enters the error state (a send while its port went down, or
/// after the port was back but before its address was) is reset, keeping
/// its number: nothing is lost and no endpoint fails, whether it is the
/// sender's QP or the one the receiver's acks leave on. (ud_zv resets its
/// one QP; uc_zv the connection's, and failed the endpoint before.)
TEST_P(ud_zv, a_qp_in_the_error_state_is_reset_and_loses_nothing)
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

/// A receiver that holds many received descriptors (UCP's unexpected eager
/// messages, an MPI code that posts its receives late): what it keeps
/// beyond RX_QUEUE_LEN is lent from more receive buffers, up to a bound
/// (2 x RX_QUEUE_LEN held); beyond it the receiver refuses new messages
/// but answers, so the sender waits and resends - no loss, no dead
/// endpoint - and all arrive in order once it gives the descriptors back.
TEST_P(ud_zv, a_receiver_holding_descriptors_keeps_its_peer_and_loses_nothing)
{
    constexpr unsigned ring = 128;
    const std::vector<std::pair<const char *, const char *>> cfg = {
            {"RX_QUEUE_LEN", "128"}, {"TIMEOUT", "3s"}};
    uct_side c, d;
    open_side(c, cfg);
    open_side(d, cfg);
    holding_sink sink;
    sink.headroom = 24; // (open_side's rx_headroom)
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, holding_sink::handler, &sink,
                                               0));
    uct_ep_h ep = create_ep(c, d);
    const rd::rd_iface &dr = *rd::to_rd(d.iface);

    // One in four kept, six rings' worth sent: 192 held, more than the ring.
    sink.keep_every = 4;
    const unsigned n1 = 6 * ring;
    uint64_t next     = 0;
    ASSERT_TRUE(send_values(ep, next, n1, {&c, &d}, 60));
    ASSERT_EQ(n1, next);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() >= n1; }, 30))
            << sink.got.size() << " of " << n1 << " delivered";
    EXPECT_TRUE(sink.in_order(n1));
    EXPECT_EQ(n1 / 4, sink.held.size());
    EXPECT_EQ(0u, s_ep_errors) << "the sender declared its holding peer dead";

    // Every one kept now, three rings more: the receiver reaches its bound
    // and holds the sender back for more than two TIMEOUTs; the sender
    // keeps its endpoint and the receiver's buffers stay bounded.
    sink.keep_every = 1;
    const unsigned n2 = 3 * ring;
    ASSERT_TRUE(send_values(ep, next, n1 + n2, {&c, &d}, 4.0)); // (refused: it is full)
    run_until({&c, &d}, [] { return false; }, 3.0);
    const size_t held_at_bound = sink.held.size();
    std::printf("[ info     ] %s: %zu delivered of %u, %zu held, %u receive buffers "
                "registered (RX_QUEUE_LEN %u), %lu endpoint errors\n",
                tl().c_str(), sink.got.size(), n1 + n2, held_at_bound,
                dr.rx_pool.allocated(), ring, static_cast<unsigned long>(s_ep_errors));
    EXPECT_EQ(0u, s_ep_errors) << "the sender declared its holding peer dead";
    EXPECT_EQ(2u * ring, held_at_bound) << "the receiver holds what its bound allows, no more";
    EXPECT_LE(dr.rx_pool.allocated(), 4u * ring) << "receive buffers beyond the bound";
    EXPECT_TRUE(sink.in_order(sink.got.size())) << "a message lost or out of order";

    // It gives them back: the rest arrive, each once and in order.
    sink.keep_every = 0;
    sink.release_all();
    ASSERT_TRUE(send_values(ep, next, n1 + n2, {&c, &d}, 60));
    ASSERT_EQ(n1 + n2, next);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() >= n1 + n2; }, 30))
            << sink.got.size() << " of " << n1 + n2 << " delivered after the release";
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    EXPECT_TRUE(sink.in_order(n1 + n2)) << "each message once, in order";
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    sink.release_all();
    close_side(c);
    close_side(d);
}

/// A send completion is requested for one send in TX_MODERATION: the
/// others are released by their acknowledgements (and 1 means every one).
/// (uc_zv: on the endpoint's own QP.)
TEST_P(ud_zv, signals_one_send_in_tx_moderation)
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

/// An endpoint destroyed right after its sends were posted (unsignaled,
/// unacknowledged): its buffers are not handed out again while the QP may
/// still read them, so another endpoint's packets reach the peer intact,
/// and the destroyed one's are delivered at most once.
TEST_P(ud_zv, an_endpoint_destroyed_with_sends_queued_reuses_no_buffer_still_posted)
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
TEST_P(ud_zv, an_endpoint_destroyed_with_sends_queued_is_freed_on_a_quiet_interface)
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

/// Endpoints that went quiet with unsignaled sends hold at most half the
/// send budget (uc_zv: each on its own QP, where only its own next signaled
/// send would cover them): sending round-robin over more endpoints than
/// TX_QUEUE_LEN / TX_MODERATION never gets stuck, and once the endpoints
/// are gone the budget is whole again.
TEST_P(ud_zv, quiet_endpoints_unsignaled_sends_hold_at_most_half_the_send_budget)
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

/// ud_zv only: uc_zv's receive state goes with its QP, which the connection
/// manager reclaims (the faults suite kills real peers for both).
class ud_zv_only : public ud_zv {};

TEST_P(ud_zv_only, a_vanished_peer_leaves_no_receive_connection)
{
    uct_side c, d;
    open_side(c);
    open_side(d, {{"TIMEOUT", "1s"}});
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d}));
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

TEST_P(ud_zv_only, a_peer_back_after_its_connection_was_reclaimed_loses_nothing)
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

/// uc_zv puts: short, bcopy and zcopy up to MAX_WRITE, clean and with
/// faults injected at the target (whose completions carry the psn): the
/// target memory holds exactly the data of the last put to each place.
class uc_zv_put
    : public sw_rel,
      public ::testing::WithParamInterface<const char *> {
protected:
    std::string tl() const override { return "uc_zv"; }
};

TEST_P(uc_zv_put, puts_land_whole_data_checked)
{
    // "drop,dup,reorder,ONE_PACKET"
    std::string spec = GetParam();
    std::string f[4];
    for (int i = 0, pos = 0; i < 4; ++i) {
        size_t comma = spec.find(',', pos);
        f[i]         = spec.substr(pos, comma - pos);
        pos          = static_cast<int>(comma + 1);
    }
    uct_side c, d;
    const std::vector<std::pair<const char *, const char *>> cfg = {
        {"FAULT_DROP", f[0].c_str()}, {"FAULT_DUP", f[1].c_str()},
        {"FAULT_REORDER", f[2].c_str()}, {"FAULT_SEED", "99"}, {"RTO", "5ms"},
        {"ONE_PACKET", f[3].c_str()}};
    open_side(c, cfg);
    open_side(d, cfg);
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    const size_t max = c.attr.cap.put.max_zcopy;
    ASSERT_GE(max, 256u);
    region src = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ);
    region dst = reg(max * 4, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    std::vector<uint8_t> want(max * 4, 0);
    unsigned round = 0;
    for (size_t len : {size_t(1), size_t(8), size_t(100), size_t(1000), size_t(4096), max}) {
        if (len > max) {
            continue;
        }
        for (unsigned k = 0; k < 12; ++k, ++round) {
            size_t off   = (round * 4099) % (max * 3);
            uint64_t raddr = reinterpret_cast<uint64_t>(dst.addr) + off;
            fill(src.addr, len, round);
            std::memcpy(want.data() + off, src.addr, len);
            ucs_status_t status;
            counting_comp comp;
            ASSERT_TRUE(run_until({&c, &d}, [&] {
                if ((k % 3 == 0) && (len <= c.attr.cap.put.max_short)) {
                    status = uct_ep_put_short(ep, src.addr, static_cast<unsigned>(len),
                                              raddr, dst.rkey.rkey);
                } else if (k % 3 == 1) {
                    pack_arg a{src.addr, len};
                    ssize_t r = uct_ep_put_bcopy(ep, pack_cb, &a, raddr, dst.rkey.rkey);
                    status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
                } else {
                    uct_iov_t iov = {src.addr, len, src.memh, 0, 1};
                    status = uct_ep_put_zcopy(ep, &iov, 1, raddr, dst.rkey.rkey, &comp.super);
                }
                return status != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_FALSE(UCS_STATUS_IS_ERR(status)) << ucs_status_string(status);
            // The source buffer is reused: wait for this put to be acknowledged.
            ASSERT_TRUE(run_until({&c, &d}, [&] {
                return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
            })) << "put " << round << " of " << len << " B never acknowledged";
            if (status == UCS_INPROGRESS) {
                EXPECT_EQ(1, comp.done);
                EXPECT_EQ(UCS_OK, comp.status);
            }
        }
    }
    EXPECT_EQ(0, std::memcmp(dst.addr, want.data(), want.size())) << "target memory differs";
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    dereg(src);
    dereg(dst);
    close_side(c);
    close_side(d);
}

INSTANTIATE_TEST_SUITE_P(clean_and_lossy, uc_zv_put,
                         ::testing::Values("0,0,0,auto", "0.05,0.05,0.05,auto",
                                           "0,0,0,off", "0.05,0.05,0.05,off"));

/// UCX_UC_ZV_ONE_PACKET: on caps active messages and puts at one packet of
/// the port's MTU, off allows SEG_SIZE / MAX_WRITE, auto is on for
/// Soft-RoCE (whose UC responder never recovers from a truncated message)
/// and off elsewhere. Data checked in both modes (puts above, AM here).
class uc_zv_one_packet : public sw_rel {
protected:
    std::string tl() const override { return "uc_zv"; }
};

TEST_F(uc_zv_one_packet, caps_messages_at_one_packet_when_on)
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

INSTANTIATE_TEST_SUITE_P(tl, ud_zv, ::testing::Values("ud_zv", "uc_zv"));
INSTANTIATE_TEST_SUITE_P(tl, ud_zv_only, ::testing::Values("ud_zv"));

} // namespace
} // namespace zv::test
