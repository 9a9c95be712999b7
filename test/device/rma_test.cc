// SPDX-License-Identifier: BSD-3-Clause
// RMA: puts over the transports with RDMA WRITE (rc_zv, uc_zv), data
// checked from 1 byte to 4 MiB (or the transport's limit), queued behind a
// full send queue, flushed by polling; gets and atomics over rc_zv; and
// rc_zv's remote keys, which grant only the access registered.
#include "tl_fixture.h"
#include "log_guard.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <cstring>
#include <numeric>
#include <vector>

namespace zv::test {

namespace {

class rma : public tl_test {
protected:
    /// A zero-copy put (local -> remote) or get (remote -> local) of the
    /// first 'size' bytes, posted when the endpoint takes it and waited
    /// for; the completion's status (an error: a failure is reported).
    ucs_status_t zcopy(uct_ep_h ep, bool is_put, const region &local, const region &remote,
                       size_t size)
    {
        uct_iov_t iov = {local.addr, size, local.memh, 0, 1};
        counting_comp c;
        ucs_status_t st;
        const uint64_t raddr = reinterpret_cast<uintptr_t>(remote.addr);
        EXPECT_TRUE(wait_for([&] {
            st = is_put ? uct_ep_put_zcopy(ep, &iov, 1, raddr, remote.rkey.rkey, &c.super)
                        : uct_ep_get_zcopy(ep, &iov, 1, raddr, remote.rkey.rkey, &c.super);
            return st != UCS_ERR_NO_RESOURCE;
        }));
        EXPECT_EQ(UCS_INPROGRESS, st);
        if (st != UCS_INPROGRESS) {
            return UCS_STATUS_IS_ERR(st) ? st : UCS_ERR_IO_ERROR;
        }
        EXPECT_TRUE(wait_for([&] { return c.done == 1; }));
        return (c.done == 1) ? c.status : UCS_ERR_TIMED_OUT;
    }
};

class put : public rma {
protected:
    uint64_t needs() const override
    {
        return UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
               UCT_IFACE_FLAG_PENDING;
    }
};

class get : public rma {
protected:
    uint64_t needs() const override
    {
        return UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY;
    }
};

/// (Whether the device has atomics is the device's: the test says so.)
class atomic : public tl_test {};

class remote_access : public tl_test {
protected:
    uint64_t needs() const override
    {
        return UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_ZCOPY;
    }
};

} // namespace

/// put_zcopy, put_bcopy (from unregistered memory) and put_short, each
/// size from 1 byte by powers of 4 up to 4 MiB or the transport's limit:
/// the target memory holds exactly what was put.
TEST_P(put, short_bcopy_zcopy_1B_to_4MiB_data_checked)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const size_t max = std::min<size_t>(4u << 20, m_a.attr.cap.put.max_zcopy);
    region local  = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    region remote = reg(max, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET);
    unsigned seed = 0;
    auto flush = [&] {
        counting_comp f;
        ucs_status_t st = uct_ep_flush(ep, 0, &f.super);
        if (st == UCS_INPROGRESS) {
            ASSERT_TRUE(wait_for([&] { return f.done == 1; }));
        } else {
            ASSERT_EQ(UCS_OK, st);
        }
    };
    std::vector<size_t> sizes;
    for (size_t size = 1; size < max; size *= 4) {
        sizes.push_back(size);
    }
    sizes.push_back(max);
    for (size_t size : sizes) {
        SCOPED_TRACE(std::to_string(size) + " B");
        ++seed;
        // put_zcopy: local -> remote
        fill(local.addr, size, seed);
        std::memset(remote.addr, 0, size);
        ASSERT_EQ(UCS_OK, zcopy(ep, true, local, remote, size));
        EXPECT_TRUE(check(remote.addr, size, seed)) << "put_zcopy " << size;
        ucs_status_t st;

        if (size <= m_a.attr.cap.put.max_bcopy) {
            // put_bcopy from unregistered memory
            std::vector<uint8_t> src(size);
            fill(src.data(), size, seed + 200);
            pack_arg arg{src.data(), size};
            ssize_t len;
            ASSERT_TRUE(wait_for([&] {
                len = uct_ep_put_bcopy(ep, pack_cb, &arg, (uintptr_t)remote.addr, remote.rkey.rkey);
                return len != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(static_cast<ssize_t>(size), len);
            flush();
            EXPECT_TRUE(check(remote.addr, size, seed + 200)) << "put_bcopy " << size;
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
            flush();
            EXPECT_TRUE(check(remote.addr, size, seed + 300)) << "put_short " << size;
        }
    }
    dereg(local);
    dereg(remote);
}

TEST_P(put, pending_under_full_send_queue_and_flush)
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

// Polled flush (no completion): a put_short is posted unsignaled, and
// the caller only calls flush again and again; both the endpoint's and the
// interface's flush must reach UCS_OK (ucx_perftest's setup and ping-pong
// hung on this) and the data must be there.
TEST_P(put, polled_flush_completes_after_unsignaled_work)
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

/// get_zcopy and get_bcopy (into unregistered memory), each size from
/// 1 byte by powers of 4 up to 4 MiB: what lands is what the remote memory
/// holds.
TEST_P(get, bcopy_zcopy_1B_to_4MiB_data_checked)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const size_t max = 4u << 20;
    region local  = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    region remote = reg(max, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET);
    unsigned seed = 0;
    for (size_t size = 1; size <= max; size *= 4) {
        ++seed;
        // get_zcopy: remote -> local
        fill(remote.addr, size, seed + 100);
        std::memset(local.addr, 0, size);
        ASSERT_EQ(UCS_OK, zcopy(ep, false, local, remote, size));
        EXPECT_TRUE(check(local.addr, size, seed + 100)) << "get_zcopy " << size;
        ucs_status_t st;

        if (size <= m_a.attr.cap.get.max_bcopy) {
            std::vector<uint8_t> dst(size);
            fill(remote.addr, size, seed + 200);
            counting_comp c3;
            ASSERT_TRUE(wait_for([&] {
                st = uct_ep_get_bcopy(ep, unpack_cb, dst.data(), size, (uintptr_t)remote.addr,
                                      remote.rkey.rkey, &c3.super);
                return st != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(UCS_INPROGRESS, st);
            ASSERT_TRUE(wait_for([&] { return c3.done == 1; }));
            EXPECT_TRUE(check(dst.data(), size, seed + 200)) << "get_bcopy " << size;
        }
    }
    dereg(local);
    dereg(remote);
}

/// UCX_RC_ZV_MAX_RD_ATOMIC beyond the device's limit (Soft-RoCE's is 128)
/// is capped to it, where it used to fail every connection; and an endpoint
/// issues no more RDMA READs at a time than its peer said it serves (here
/// 1): many reads in flight both ways land whole.
TEST_P(get, max_rd_atomic_is_capped_to_the_device_and_to_the_peer)
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

TEST_P(atomic, fetch_add_cswap_and_add_64)
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

TEST_P(remote_access, access_outside_registration_is_an_endpoint_error)
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
TEST_P(remote_access, keys_grant_only_the_access_registered)
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


ZV_INSTANTIATE(put, ZV_TLS_PUT);
ZV_INSTANTIATE(get, ZV_TLS_RC);
ZV_INSTANTIATE(atomic, ZV_TLS_RC);
ZV_INSTANTIATE(remote_access, ZV_TLS_RC);

} // namespace zv::test
