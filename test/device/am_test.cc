// SPDX-License-Identifier: BSD-3-Clause
// Active messages over every zv transport: short, bcopy and zero-copy
// data checked up to their limits, a stream delivered exactly once and in
// order, many endpoints, a receiver that holds descriptors, alignment of
// what is received, and bad input (AM id, lengths) refused without harm to
// the connection (UCX's test_uct_am, uct_p2p_am_test, uct_p2p_err_test and
// uct_p2p_am_alignment ask the same of UCX's own transports).
#include "tl_fixture.h"
#include "log_guard.h"

#include "rc/rc_iface.h"
#include "rd/rd_iface.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace zv::test {

namespace {

class am : public tl_test {
protected:
    uint64_t needs() const override
    {
        return UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY;
    }
};

size_t pack_nothing(void *, void *) { return 0; }

/// Each of 'ops' (a name and a send) is refused with UCS_ERR_INVALID_PARAM
/// and an error log that names 'what', and logs nothing else.
template <typename Ops> void expect_refused(const Ops &ops, const char *what)
{
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        expect_log_problems logs;
        ucs_status_t st = op.second();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, st) << ucs_status_string(st);
        EXPECT_GT(logs.matching(what), 0u) << logs.text();
        EXPECT_EQ(0u, logs.others(what)) << logs.text();
    }
}

} // namespace

TEST_P(am, short_bcopy_zcopy_up_to_their_limits_data_checked)
{
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, 5, am_sink::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);

    // short: header + payload up to max_short (which counts the header)
    uint64_t hdr = 0x1122334455667788ull;
    std::vector<uint8_t> payload(m_a.attr.cap.am.max_short - sizeof(hdr));
    fill(payload.data(), payload.size(), 1);
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_short(ep, 5, hdr, payload.data(), static_cast<unsigned>(payload.size()));
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_EQ(UCS_OK, st);

    // bcopy: 1 B .. max_bcopy (the sizes below it that the transport has)
    std::vector<size_t> sizes;
    for (size_t size : {size_t(1), size_t(7), size_t(64), size_t(1000), size_t(4096)}) {
        if (size < m_a.attr.cap.am.max_bcopy) {
            sizes.push_back(size);
        }
    }
    sizes.push_back(m_a.attr.cap.am.max_bcopy);
    std::vector<uint8_t> src(m_a.attr.cap.am.max_bcopy);
    for (size_t i = 0; i < sizes.size(); ++i) {
        fill(src.data(), sizes[i], 10 + static_cast<unsigned>(i));
        pack_arg arg{src.data(), sizes[i]};
        ssize_t len;
        ASSERT_TRUE(wait_for([&] {
            len = uct_ep_am_bcopy(ep, 5, pack_cb, &arg, 0);
            return len != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(static_cast<ssize_t>(sizes[i]), len);
    }

    // zcopy: header + registered payload
    region r = reg(m_a.attr.cap.am.max_zcopy, UCT_MD_MEM_ACCESS_ALL);
    uint64_t zhdr = 42;
    size_t zlen   = m_a.attr.cap.am.max_zcopy - sizeof(zhdr);
    fill(r.addr, zlen, 99);
    uct_iov_t iov = {r.addr, zlen, r.memh, 0, 1};
    counting_comp comp;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_zcopy(ep, 5, &zhdr, sizeof(zhdr), &iov, 1, 0, &comp.super);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
    size_t expected = 2 + sizes.size();
    ASSERT_TRUE(wait_for([&] { return sink.messages.size() == expected; }));
    if (st == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.done == 1; }));
        EXPECT_EQ(UCS_OK, comp.status);
    }

    ASSERT_EQ(sizeof(hdr) + payload.size(), sink.messages[0].size());
    EXPECT_EQ(0, std::memcmp(sink.messages[0].data(), &hdr, sizeof(hdr)));
    EXPECT_EQ(0, std::memcmp(sink.messages[0].data() + 8, payload.data(), payload.size()));
    for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_EQ(sizes[i], sink.messages[1 + i].size());
        EXPECT_TRUE(check(sink.messages[1 + i].data(), sizes[i], 10 + static_cast<unsigned>(i)))
                << "am_bcopy of " << sizes[i] << " bytes";
    }
    auto &z = sink.messages.back();
    ASSERT_EQ(sizeof(zhdr) + zlen, z.size());
    EXPECT_EQ(0, std::memcmp(z.data(), &zhdr, sizeof(zhdr)));
    EXPECT_TRUE(check(z.data() + sizeof(zhdr), zlen, 99));
    dereg(r);
}

TEST_P(am, short_bcopy_zcopy_exactly_once_in_order)
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

/// Many endpoints of one interface to another, created without waiting for
/// any of them to connect: each one's message arrives, once.
TEST_P(am, many_endpoints_in_one_process)
{
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_sink::handler, &sink, 0));
    const unsigned count = 256;
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < count; ++i) {
        uct_ep_h ep = create_ep(m_a, m_b);
        ASSERT_NE(nullptr, ep) << i;
        eps.push_back(ep);
    }
    for (unsigned i = 0; i < count; ++i) {
        uint64_t hdr = i;
        ucs_status_t st;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(eps[i], am_id, hdr, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        })) << "endpoint " << i;
        ASSERT_EQ(UCS_OK, st) << "endpoint " << i;
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
    EXPECT_EQ(count, std::count(seen.begin(), seen.end(), true));
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
}

/// A receiver that holds many received descriptors (UCP's unexpected eager
/// messages, an MPI code that posts its receives late) loses nothing and
/// keeps its peer. What it keeps beyond RX_QUEUE_LEN is lent from more
/// receive buffers: rc_zv's receive pool grows for all it holds (as UCX's
/// rc_verbs' does), so its shared receive queue stays posted; ud_zv and
/// uc_zv lend up to a bound (2 x RX_QUEUE_LEN held), beyond which the
/// receiver refuses new messages but answers, so the sender waits and
/// resends - no loss, no dead endpoint - and all arrive in order once it
/// gives the descriptors back.
TEST_P(am, a_receiver_holding_descriptors_keeps_its_peer_and_loses_nothing)
{
    constexpr unsigned ring = 128;
    std::vector<std::pair<const char *, const char *>> cfg = {{"RX_QUEUE_LEN", "128"}};
    if (is_rd()) {
        cfg.push_back({"TIMEOUT", "3s"});
    }
    uct_side c, d;
    open_side(c, cfg);
    open_side(d, cfg);
    holding_sink sink;
    sink.headroom = 24; // (open_side's rx_headroom)
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, holding_sink::handler, &sink,
                                               0));
    uct_ep_h ep = create_ep(c, d);
    auto rx_buffers = [&] {
        return is_rd() ? rd::to_rd(d.iface)->rx_pool.allocated()
                       : rc::to_rc(d.iface)->rx_pool.allocated();
    };

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

    // Every one kept now, three rings more: ud_zv and uc_zv reach their
    // bound and hold the sender back for more than two TIMEOUTs; the
    // sender keeps its endpoint and the receiver's buffers stay bounded.
    // rc_zv takes them all.
    sink.keep_every = 1;
    const unsigned n2 = 3 * ring;
    ASSERT_TRUE(send_values(ep, next, n1 + n2, {&c, &d}, is_rd() ? 4.0 : 60.0));
    if (!is_rd()) {
        ASSERT_EQ(n1 + n2, next);
        ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() >= n1 + n2; }, 30))
                << sink.got.size() << " of " << n1 + n2 << " delivered";
    }
    run_until({&c, &d}, [] { return false; }, 3.0);
    const size_t held_at_bound = sink.held.size();
    std::printf("[ info     ] %s: %zu delivered of %u, %zu held, %u receive buffers "
                "registered (RX_QUEUE_LEN %u), %lu endpoint errors\n",
                tl_name(), sink.got.size(), n1 + n2, held_at_bound, rx_buffers(), ring,
                static_cast<unsigned long>(s_ep_errors));
    EXPECT_EQ(0u, s_ep_errors) << "the sender declared its holding peer dead";
    if (is_rd()) {
        EXPECT_EQ(2u * ring, held_at_bound) << "the receiver holds what its bound allows, no more";
        EXPECT_LE(rx_buffers(), 4u * ring) << "receive buffers beyond the bound";
    } else {
        EXPECT_EQ(n1 / 4 + n2, held_at_bound) << "rc_zv holds every descriptor it was given";
    }
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

/// An interface opened with an AM alignment delivers every active message
/// it receives (short, bcopy, zero-copy; the data in a receive descriptor)
/// with data + am_align_offset on that boundary, as UCT promises
/// (uct_p2p_am_alignment.align_*, which every zv transport failed).
TEST_P(am, received_active_messages_are_aligned_as_the_interface_asked)
{
    struct case_t {
        size_t align, offset;
    };
    region r = reg(64, UCT_MD_MEM_ACCESS_ALL);
    for (const case_t &c : {case_t{64, 0}, case_t{256, 3}, case_t{4096, 128}, case_t{8192, 8},
                            case_t{2, 1}}) {
        SCOPED_TRACE("alignment " + std::to_string(c.align) + " offset " +
                     std::to_string(c.offset));
        uct_side s;
        open_side(s, {}, UCS_ASYNC_MODE_THREAD_SPINLOCK, [&](uct_iface_params_t &p) {
            p.field_mask |= UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT |
                            UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
            p.am_alignment    = c.align;
            p.am_align_offset = c.offset;
        });
        struct sink_t {
            std::vector<uintptr_t> misaligned;
            unsigned got = 0;
            size_t align, offset;
            static ucs_status_t handler(void *arg, void *data, size_t, unsigned flags)
            {
                auto *self = static_cast<sink_t *>(arg);
                ++self->got;
                const auto p = reinterpret_cast<uintptr_t>(data) + self->offset;
                if ((flags & UCT_CB_PARAM_FLAG_DESC) && (p % self->align != 0)) {
                    self->misaligned.push_back(p);
                }
                return UCS_OK;
            }
        } sink{{}, 0, c.align, c.offset};
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(s.iface, am_id, sink_t::handler, &sink, 0));
        uct_ep_h ep = create_ep(m_a, s);
        ASSERT_NE(nullptr, ep);
        uint64_t v = 7;
        counting_comp z;
        uct_iov_t iov = {r.addr, 64, r.memh, 0, 1};
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, am_id, 1, &v, sizeof(v)));
        ASSERT_LE(0, uct_ep_am_bcopy(ep, am_id, [](void *dest, void *) -> size_t {
            std::memset(dest, 1, 100);
            return 100;
        }, nullptr, 0));
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, am_id, &v, sizeof(v), &iov, 1, 0,
                                                  &z.super));
        EXPECT_TRUE(run_until({&m_a, &s}, [&] { return (sink.got == 3) && (z.done == 1); }, 30))
                << sink.got << " of 3 arrived";
        EXPECT_TRUE(sink.misaligned.empty()) << sink.misaligned.size() << " misaligned, the "
                                             << "first at " << std::hex
                                             << (sink.misaligned.empty() ? 0 :
                                                 sink.misaligned[0]);
        uct_ep_destroy(ep);
        close_side(s);
    }
    dereg(r);
    EXPECT_EQ(0u, s_ep_errors);
}

/// A send with an active message id >= UCT_AM_ID_MAX is refused
/// (UCS_ERR_INVALID_PARAM, an error log naming the active message id)
/// before anything is posted, by every AM operation; the connection goes
/// on (ud_zv used to post it, its receiver dropped it unacknowledged, and
/// the endpoint died at the peer timeout).
TEST_P(am, a_send_with_an_invalid_am_id_is_refused_and_the_connection_keeps_working)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region r = reg(64, UCT_MD_MEM_ACCESS_ALL);
    uint64_t payload = 0;
    const uint8_t bad_id = UCT_AM_ID_MAX;
    const uct_iov_t short_iov = {&payload, sizeof(payload), UCT_MEM_HANDLE_NULL, 0, 1};
    const uct_iov_t zcopy_iov = {r.addr, 64, r.memh, 0, 1};
    const std::pair<const char *, std::function<ucs_status_t()>> ops[] = {
        {"am_short", [&] { return uct_ep_am_short(ep, bad_id, 1, &payload, sizeof(payload)); }},
        {"am_short_iov", [&] { return uct_ep_am_short_iov(ep, bad_id, &short_iov, 1); }},
        {"am_bcopy", [&] {
             ssize_t n = uct_ep_am_bcopy(ep, bad_id, pack_nothing, nullptr, 0);
             return (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
         }},
        {"am_zcopy", [&] {
             return uct_ep_am_zcopy(ep, bad_id, &payload, sizeof(payload), &zcopy_iov, 1, 0,
                                    nullptr);
         }},
    };
    expect_refused(ops, "active message id");
    expect_connection_works(ep, 0x51);
    dereg(r);
}

/// A short send one byte over its maximum (max_short counts the 8-byte AM
/// header, as UCT's does) is refused with an error log naming the length,
/// and so is an am_short_iov and a put_short one byte over: nothing reaches
/// the device (rc_zv's put_short used to fail its post), and the connection
/// goes on.
TEST_P(am, an_oversized_short_send_is_refused_and_the_connection_keeps_working)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const uct_iface_attr_t &attr = m_a.attr;
    ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT);
    std::vector<char> buf(std::max<size_t>(attr.cap.am.max_short, attr.cap.put.max_short) + 1);
    const unsigned over = static_cast<unsigned>(attr.cap.am.max_short + 1 - sizeof(uint64_t));
    const uct_iov_t iov = {buf.data(), attr.cap.am.max_short + 1, UCT_MEM_HANDLE_NULL, 0, 1};
    region remote       = reg(buf.size(), UCT_MD_MEM_ACCESS_ALL);
    std::vector<std::pair<const char *, std::function<ucs_status_t()>>> ops = {
        {"am_short", [&] { return uct_ep_am_short(ep, am_id, 1, buf.data(), over); }},
        {"am_short_iov", [&] { return uct_ep_am_short_iov(ep, am_id, &iov, 1); }},
    };
    if (attr.cap.flags & UCT_IFACE_FLAG_PUT_SHORT) {
        ops.emplace_back("put_short", [&] {
            return uct_ep_put_short(ep, buf.data(),
                                    static_cast<unsigned>(attr.cap.put.max_short + 1),
                                    reinterpret_cast<uintptr_t>(remote.addr),
                                    remote.rkey.rkey);
        });
    }
    // What the receiver gets meanwhile: only the message at the limit.
    am_values early;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &early, 0));
    expect_refused(ops, "length");
    // At the limit exactly, each is taken.
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_short(ep, am_id, 2, buf.data(), over - 1);
        return st != UCS_ERR_NO_RESOURCE;
    }, 10));
    EXPECT_EQ(UCS_OK, st);
    EXPECT_TRUE(wait_for([&] { return early.got.size() == 1; }, 10))
            << early.got.size() << " messages arrived; only the one at the limit was sent";
    expect_connection_works(ep, 0x52);
    dereg(remote);
}

TEST_P(am, zcopy_beyond_the_advertised_limits_is_refused)
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

ZV_INSTANTIATE(am, ZV_TLS_ALL);

} // namespace zv::test
