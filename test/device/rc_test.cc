// SPDX-License-Identifier: BSD-3-Clause
// rc_zv at the UCT level: active messages, RMA, atomics, flush, pending,
// many endpoints, remote access errors. Data is checked on every transfer.
#include "test_util.h"
#include "uct_fixture.h"
#include "log_guard.h"

#include "rc/rc_iface.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace zv::test {

namespace {

class rc_zv : public uct_test {};

TEST_F(rc_zv, advertises_what_it_implements)
{
    const uint64_t f = m_a.attr.cap.flags;
    EXPECT_TRUE(f & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_BCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_ZCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_PUT_ZCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_GET_ZCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_PENDING);
    EXPECT_FALSE(f & UCT_IFACE_FLAG_CONNECT_TO_EP);
    EXPECT_GT(m_a.attr.bandwidth.shared, 0);
    EXPECT_EQ(19u, m_a.attr.device_addr_len);
}

TEST_F(rc_zv, am_short_bcopy_zcopy_data_checked)
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

    // bcopy: 1 B .. max_bcopy
    std::vector<size_t> sizes = {1, 7, 64, 1000, 4096, m_a.attr.cap.am.max_bcopy};
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

TEST_F(rc_zv, put_and_get_1B_to_4MiB_data_checked)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const size_t max = 4u << 20;
    region local  = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    region remote = reg(max, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET);
    unsigned seed = 0;
    for (size_t size = 1; size <= max; size *= 4) {
        ++seed;
        // put_zcopy: local -> remote
        fill(local.addr, size, seed);
        std::memset(remote.addr, 0, size);
        uct_iov_t iov = {local.addr, size, local.memh, 0, 1};
        counting_comp c1;
        ucs_status_t st;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)remote.addr, remote.rkey.rkey, &c1.super);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, st);
        ASSERT_TRUE(wait_for([&] { return c1.done == 1; }));
        EXPECT_EQ(UCS_OK, c1.status);
        EXPECT_TRUE(check(remote.addr, size, seed)) << "put_zcopy " << size;

        // get_zcopy: remote -> local
        fill(remote.addr, size, seed + 100);
        std::memset(local.addr, 0, size);
        counting_comp c2;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_get_zcopy(ep, &iov, 1, (uintptr_t)remote.addr, remote.rkey.rkey, &c2.super);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, st);
        ASSERT_TRUE(wait_for([&] { return c2.done == 1; }));
        EXPECT_EQ(UCS_OK, c2.status);
        EXPECT_TRUE(check(local.addr, size, seed + 100)) << "get_zcopy " << size;

        if (size <= m_a.attr.cap.put.max_bcopy) {
            // put_bcopy from unregistered memory, then get_bcopy back
            std::vector<uint8_t> src(size), dst(size);
            fill(src.data(), size, seed + 200);
            pack_arg arg{src.data(), size};
            ssize_t len;
            ASSERT_TRUE(wait_for([&] {
                len = uct_ep_put_bcopy(ep, pack_cb, &arg, (uintptr_t)remote.addr, remote.rkey.rkey);
                return len != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(static_cast<ssize_t>(size), len);
            counting_comp c3;
            ASSERT_TRUE(wait_for([&] {
                st = uct_ep_get_bcopy(ep, unpack_cb, dst.data(), size, (uintptr_t)remote.addr,
                                      remote.rkey.rkey, &c3.super);
                return st != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(UCS_INPROGRESS, st);
            ASSERT_TRUE(wait_for([&] { return c3.done == 1; }));
            EXPECT_TRUE(check(dst.data(), size, seed + 200)) << "put/get_bcopy " << size;
        }
        if (size <= m_a.attr.cap.put.max_short) {
            std::vector<uint8_t> src(size);
            fill(src.data(), size, seed + 300);
            ASSERT_TRUE(wait_for([&] {
                st = uct_ep_put_short(ep, src.data(), static_cast<unsigned>(size),
                                      (uintptr_t)remote.addr, remote.rkey.rkey);
                return st != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(UCS_OK, st);
            counting_comp f;
            st = uct_ep_flush(ep, 0, &f.super);
            if (st == UCS_INPROGRESS) {
                ASSERT_TRUE(wait_for([&] { return f.done == 1; }));
            } else {
                ASSERT_EQ(UCS_OK, st);
            }
            EXPECT_TRUE(check(remote.addr, size, seed + 300)) << "put_short " << size;
        }
    }
    dereg(local);
    dereg(remote);
}

TEST_F(rc_zv, atomics_64)
{
    if (!(m_a.attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE)) {
        GTEST_SKIP() << "device reports no atomics";
    }
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region remote = reg(4096, UCT_MD_MEM_ACCESS_REMOTE_ATOMIC);
    auto *value   = static_cast<uint64_t *>(remote.addr);
    *value        = 1000;
    uint64_t result = 0;
    counting_comp c1;
    ucs_status_t st = uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 5, &result,
                                            (uintptr_t)value, remote.rkey.rkey, &c1.super);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_for([&] { return c1.done == 1; }));
    EXPECT_EQ(1000u, result);
    EXPECT_EQ(1005u, *value);

    counting_comp c2;
    st = uct_ep_atomic_cswap64(ep, 1005, 7, (uintptr_t)value, remote.rkey.rkey, &result,
                               &c2.super);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_for([&] { return c2.done == 1; }));
    EXPECT_EQ(1005u, result);
    EXPECT_EQ(7u, *value);

    ASSERT_EQ(UCS_OK, uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 3, (uintptr_t)value,
                                           remote.rkey.rkey));
    counting_comp f;
    st = uct_ep_flush(ep, 0, &f.super);
    if (st == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return f.done == 1; }));
    }
    EXPECT_EQ(10u, *value);
    dereg(remote);
}

/// A receiver that keeps every descriptor (UCP's unexpected eager
/// messages), four times RX_QUEUE_LEN of them: rc_zv's receive pool grows
/// for what UCP holds (as UCX's rc_verbs' does), so its shared receive
/// queue stays posted, nothing is lost and the connection lives; they
/// are all given back at the end.
TEST_F(rc_zv, a_receiver_holding_descriptors_loses_nothing)
{
    constexpr unsigned ring = 64, n = 4 * ring;
    uct_side c, d;
    open_side(c, {{"RX_QUEUE_LEN", "64"}});
    open_side(d, {{"RX_QUEUE_LEN", "64"}});
    holding_sink sink;
    sink.headroom   = 24; // (open_side's rx_headroom)
    sink.keep_every = 1;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, 5, holding_sink::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    ASSERT_NE(nullptr, ep);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 30))
            << "the endpoint did not connect";
    for (uint64_t v = 0; v < n;) {
        ucs_status_t st = uct_ep_am_short(ep, 5, v, nullptr, 0);
        if (st == UCS_OK) {
            ++v;
        } else {
            ASSERT_EQ(UCS_ERR_NO_RESOURCE, st) << ucs_status_string(st);
            uct_worker_progress(c.worker);
            uct_worker_progress(d.worker);
        }
    }
    ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.got.size() >= n; }, 30))
            << sink.got.size() << " of " << n << " delivered";
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    std::printf("[ info     ] rc_zv: %zu delivered of %u, %zu held, %u receive buffers "
                "registered (RX_QUEUE_LEN %u), %u endpoint errors\n",
                sink.got.size(), n, sink.held.size(), rc::to_rc(d.iface)->rx_pool.allocated(),
                ring, s_ep_errors);
    EXPECT_TRUE(sink.in_order(n)) << "each message once, in order";
    EXPECT_EQ(n, sink.held.size());
    EXPECT_EQ(0u, s_ep_errors);
    sink.release_all();
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

TEST_F(rc_zv, pending_under_full_send_queue_and_flush)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region remote = reg(1 << 20, UCT_MD_MEM_ACCESS_REMOTE_PUT);
    std::vector<uint64_t> src(4096);
    std::iota(src.begin(), src.end(), 1);
    // Fill the send queue without progressing.
    unsigned posted = 0;
    ucs_status_t st;
    while ((st = uct_ep_put_short(ep, &src[posted % src.size()], 8,
                                  (uintptr_t)remote.addr + 8 * (posted % 4096),
                                  remote.rkey.rkey)) == UCS_OK) {
        ++posted;
        ASSERT_LT(posted, 100000u) << "send queue never filled";
    }
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
    EXPECT_GT(posted, 0u);

    struct pend {
        uct_pending_req_t super;
        uct_ep_h          ep;
        uint64_t          value;
        uint64_t          addr;
        uct_rkey_t        rkey;
        int               calls = 0;
        static ucs_status_t cb(uct_pending_req_t *self)
        {
            auto *p = reinterpret_cast<pend *>(self);
            ++p->calls;
            return uct_ep_put_short(p->ep, &p->value, 8, p->addr, p->rkey);
        }
    } req;
    req.super.func = pend::cb;
    req.ep         = ep;
    req.value      = 0xfeedfacecafebeefull;
    req.addr       = (uintptr_t)remote.addr + (1 << 19);
    req.rkey       = remote.rkey.rkey;
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &req.super, 0));
    ASSERT_TRUE(wait_for([&] { return req.calls > 0; })) << "pending never dispatched";

    counting_comp f;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_flush(ep, 0, &f.super);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    if (st == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return f.done == 1; }));
    } else {
        ASSERT_EQ(UCS_OK, st);
    }
    uint64_t got;
    std::memcpy(&got, static_cast<char *>(remote.addr) + (1 << 19), 8);
    EXPECT_EQ(req.value, got);
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_a.iface, 0, nullptr));
    dereg(remote);
}

TEST_F(rc_zv, many_endpoints_in_one_process)
{
    am_sink sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, 7, am_sink::handler, &sink, 0));
    const unsigned count = 128;
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < count; ++i) {
        uct_ep_h ep = connect(m_a, m_b);
        ASSERT_NE(nullptr, ep) << i;
        eps.push_back(ep);
    }
    for (unsigned i = 0; i < count; ++i) {
        uint64_t hdr = i;
        ucs_status_t st;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(eps[i], 7, hdr, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_OK, st);
    }
    ASSERT_TRUE(wait_for([&] { return sink.messages.size() == count; }));
    std::vector<bool> seen(count);
    for (auto &m : sink.messages) {
        uint64_t v;
        ASSERT_EQ(8u, m.size());
        std::memcpy(&v, m.data(), 8);
        ASSERT_LT(v, count);
        seen[v] = true;
    }
    EXPECT_EQ(count, std::count(seen.begin(), seen.end(), true));
}

TEST_F(rc_zv, access_outside_registration_is_an_endpoint_error)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region local  = reg(8192, UCT_MD_MEM_ACCESS_LOCAL_READ);
    region remote = reg(4096, UCT_MD_MEM_ACCESS_REMOTE_PUT);
    std::memset(remote.addr, 0xab, 4096);
    // 8 KiB into a 4 KiB registration: the device must refuse it.
    uct_iov_t iov = {local.addr, 8192, local.memh, 0, 1};
    counting_comp c;
    ucs_status_t st = uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)remote.addr,
                                       remote.rkey.rkey, &c.super);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_for([&] { return c.done == 1; }));
    EXPECT_NE(UCS_OK, c.status);
    EXPECT_EQ(1u, s_ep_errors);
    EXPECT_NE(UCS_OK, s_last_ep_error);
    // Nothing beyond what the rkey grants was written, nothing inside either.
    EXPECT_EQ(0xab, static_cast<uint8_t *>(remote.addr)[0]);
    EXPECT_EQ(0xab, static_cast<uint8_t *>(remote.addr)[4095]);
    dereg(local);
    dereg(remote);
    EXPECT_TRUE(logged_only(logs, "remote access error"));
}

// Keys grant only what the registration asked for: a buffer registered for
// sending (local read) takes no RDMA WRITE, one registered for puts gives
// no RDMA READ. The device refuses, the endpoint reports an error, and the
// memory is unchanged (not read: the get's target keeps its pattern).
TEST_F(rc_zv, keys_grant_only_the_access_registered)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    region src   = reg(4096, UCT_MD_MEM_ACCESS_LOCAL_READ);
    region sendb = reg(4096, UCT_MD_MEM_ACCESS_LOCAL_READ); // a send buffer
    region putb  = reg(4096, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    region dst   = reg(4096, UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    std::memset(src.addr, 0x11, 4096);
    std::memset(sendb.addr, 0xab, 4096);
    std::memset(putb.addr, 0xcd, 4096);
    std::memset(dst.addr, 0x5a, 4096);

    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    uct_iov_t iov = {src.addr, 4096, src.memh, 0, 1};
    counting_comp c;
    ucs_status_t st = uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)sendb.addr, sendb.rkey.rkey,
                                       &c.super);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_for([&] { return c.done == 1; }));
    EXPECT_NE(UCS_OK, c.status) << "RDMA WRITE into a send-only buffer succeeded";
    EXPECT_EQ(1u, s_ep_errors);
    for (size_t i = 0; i < 4096; i += 511) {
        ASSERT_EQ(0xab, static_cast<uint8_t *>(sendb.addr)[i]) << "written at " << i;
    }

    uct_ep_h ep2 = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep2);
    uct_iov_t giov = {dst.addr, 4096, dst.memh, 0, 1};
    counting_comp g;
    st = uct_ep_get_zcopy(ep2, &giov, 1, (uintptr_t)putb.addr, putb.rkey.rkey, &g.super);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_for([&] { return g.done == 1; }));
    EXPECT_NE(UCS_OK, g.status) << "RDMA READ from a put-only buffer succeeded";
    EXPECT_EQ(2u, s_ep_errors);
    for (size_t i = 0; i < 4096; i += 511) {
        ASSERT_EQ(0x5a, static_cast<uint8_t *>(dst.addr)[i]) << "read into at " << i;
    }
    dereg(src);
    dereg(sendb);
    dereg(putb);
    dereg(dst);
    EXPECT_TRUE(logged_only(logs, "remote access error"));
}

// Polled flush (no completion): a put_short is posted unsignaled, and
// the caller only calls flush again and again; both the endpoint's and the
// interface's flush must reach UCS_OK (ucx_perftest's setup and ping-pong
// hung on this) and the data must be there.
TEST_F(rc_zv, polled_flush_completes_after_unsignaled_work)
{
    region dst = reg(4096, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const uint64_t v = 0x0123456789abcdefull;
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_put_short(ep, &v, sizeof(v), (uintptr_t)dst.addr, dst.rkey.rkey);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_EQ(UCS_OK, st);
    EXPECT_TRUE(wait_for([&] { return uct_iface_flush(m_a.iface, 0, nullptr) == UCS_OK; }, 20))
            << "polled iface flush never completed";
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_put_short(ep, &v, sizeof(v), (uintptr_t)dst.addr + 8, dst.rkey.rkey);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 20))
            << "polled ep flush never completed";
    EXPECT_EQ(0, std::memcmp(dst.addr, &v, sizeof(v)));
    EXPECT_EQ(0, std::memcmp(static_cast<char *>(dst.addr) + 8, &v, sizeof(v)));
    dereg(dst);
}

/// UCX_RC_ZV_MAX_RD_ATOMIC beyond the device's limit (Soft-RoCE's is 128)
/// is capped to it, where it used to fail every connection; and an endpoint
/// issues no more RDMA READs at a time than its peer said it serves (here
/// 1): many reads in flight both ways land whole.
TEST_F(rc_zv, max_rd_atomic_is_capped_to_the_device_and_to_the_peer)
{
    uct_side many, one;
    open_side(many, {{"MAX_RD_ATOMIC", "255"}});
    open_side(one, {{"MAX_RD_ATOMIC", "1"}});
    auto run_until = [&](auto pred) {
        auto start = std::chrono::steady_clock::now();
        while (!pred()) {
            uct_worker_progress(many.worker);
            uct_worker_progress(one.worker);
            if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
                return pred();
            }
        }
        return true;
    };
    uct_ep_h to_one  = create_ep(many, one);
    uct_ep_h to_many = create_ep(one, many);
    ASSERT_NE(nullptr, to_one);
    ASSERT_NE(nullptr, to_many);
    ASSERT_TRUE(run_until([&] {
        return (uct_ep_flush(to_one, 0, nullptr) == UCS_OK) &&
               (uct_ep_flush(to_many, 0, nullptr) == UCS_OK);
    })) << "the endpoints did not connect";
    constexpr size_t piece = 64 * 1024;
    constexpr unsigned pieces = 32;
    for (int way = 0; way < 2; ++way) {
        SCOPED_TRACE(way == 0 ? "reads by the side of 255 from the side of 1"
                              : "reads by the side of 1 from the side of 255");
        uct_ep_h ep   = (way == 0) ? to_one : to_many;
        region local  = reg(piece * pieces,
                            UCT_MD_MEM_ACCESS_LOCAL_READ | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
        region remote = reg(piece * pieces, UCT_MD_MEM_ACCESS_REMOTE_GET);
        fill(remote.addr, piece * pieces, 7 + way);
        std::memset(local.addr, 0, piece * pieces);
        std::vector<counting_comp> comps(pieces);
        for (unsigned i = 0; i < pieces; ++i) {
            uct_iov_t iov = {static_cast<char *>(local.addr) + i * piece, piece, local.memh,
                             0, 1};
            ucs_status_t st;
            ASSERT_TRUE(run_until([&] {
                st = uct_ep_get_zcopy(ep, &iov, 1,
                                      reinterpret_cast<uintptr_t>(remote.addr) + i * piece,
                                      remote.rkey.rkey, &comps[i].super);
                return st != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(UCS_INPROGRESS, st) << "get " << i;
        }
        ASSERT_TRUE(run_until([&] {
            for (const counting_comp &c : comps) {
                if (c.done == 0) {
                    return false;
                }
            }
            return true;
        })) << "reads never completed";
        for (const counting_comp &c : comps) {
            EXPECT_EQ(UCS_OK, c.status);
        }
        EXPECT_TRUE(check(local.addr, piece * pieces, 7 + way));
        dereg(local);
        dereg(remote);
    }
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(to_many);
    uct_ep_destroy(to_one);
    close_side(one);
    close_side(many);
}

TEST_F(rc_zv, receiver_not_ready_loses_nothing)
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

/// A rank that computes (no progress) when a peer connects to it for the
/// first time and sends: its async side answers the connection request,
/// so the sender's endpoint connects instead of failing at CONN_TIMEOUT;
/// the device holds what does not fit the computing rank's 16 receive
/// buffers (receiver-not-ready, retried without end), and its next
/// progress calls hand every message to UCP, once and in order.
TEST_F(rc_zv, a_computing_peer_is_connected_to_and_loses_nothing)
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
TEST_F(rc_zv, an_idle_interface_sleeps_while_its_worker_computes_and_a_connecting_peer_wakes_it)
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

/// Messages that event_arm() finds while it arms the completion queues
/// (the caller is told to progress instead of sleeping) are delivered by
/// the next progress call, all of them, once, in order.
TEST_F(rc_zv, messages_found_while_arming_events_are_delivered_by_the_next_progress)
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
/// when it returns: rc_iface::in_progress still holds).
TEST_F(rc_zv, a_handler_that_progresses_its_worker_leaves_the_outer_call_in_charge)
{
    struct nesting {
        uct_worker_h       worker;
        const rc::rc_iface *iface;
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
                self->still_in_progress = self->still_in_progress && self->iface->in_progress;
            }
            return UCS_OK;
        }
    } n{m_b.worker, rc::to_rc(m_b.iface)};
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
    EXPECT_FALSE(rc::to_rc(m_b.iface)->in_progress);
}

/// The registration cache's invalidation source is chosen once per process,
/// by the first md opened: a later md that asks for another one is told so,
/// once, and works with the first one's.
TEST_F(rc_zv, a_later_md_asking_for_another_monitor_is_warned_once)
{
    expect_log_problems logs;
    // One of the two differs from whatever the first md chose.
    for (const char *kind : {"none", "uffd", "none", "uffd"}) {
        uct_md_config_t *cfg;
        ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, nullptr, nullptr, &cfg));
        ASSERT_EQ(UCS_OK, uct_config_modify(cfg, "RCACHE_MONITOR", kind));
        uct_md_h md;
        ucs_status_t status = uct_md_open(m_component, m_md_name.c_str(), cfg, &md);
        uct_config_release(cfg);
        ASSERT_EQ(UCS_OK, status) << kind;
        uct_md_close(md);
    }
    EXPECT_EQ(1u, logs.matching("is chosen once per process")) << logs.text();
    EXPECT_TRUE(logged_only(logs, "UCX_ZV_RCACHE_MONITOR="));
}

} // namespace
} // namespace zv::test
