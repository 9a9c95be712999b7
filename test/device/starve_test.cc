// SPDX-License-Identifier: BSD-3-Clause
// Send buffers run out and cannot grow (TX_MAX_BUFS here; a full memory-
// region table or locked-memory limit in the field): a sender that does
// what UCP does (send; on NO_RESOURCE pending_add; on BUSY send again at
// once, without progress) must get queued, not spin, and every message
// must arrive, in order. On rc_zv the buffers are fewer than TX_MODERATION:
// all of them sit behind unsignaled sends, whose completions only a
// signaled one can report.
#include "test_util.h"
#include "uct_fixture.h"

#include <algorithm>
#include <cstring>
#include <vector>
#include <string>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 13;

class starved : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    void SetUp() override
    {
        uct_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        close_side(m_a);
        std::vector<std::pair<const char *, const char *>> modify = {{"TX_MAX_BUFS", "16"}};
        if (std::string(GetParam()) == "rc_zv") {
            modify.push_back({"TX_MODERATION", "32"});
        }
        open_side(m_a, modify);
    }
};

struct in_order {
    uint32_t next = 0, bad = 0;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
    {
        auto *self = static_cast<in_order *>(arg);
        uint32_t v;
        if ((length != 64) || (std::memcpy(&v, data, 4), v != self->next)) {
            ++self->bad;
        }
        ++self->next;
        return UCS_OK;
    }
};

struct msg {
    uint32_t index;
    static size_t pack(void *dest, void *arg)
    {
        std::memset(dest, 0x5a, 64);
        std::memcpy(dest, &static_cast<msg *>(arg)->index, 4);
        return 64;
    }
};

/// One 64-byte message: by copy, or zero-copy with its first 8 bytes as
/// the header (copied into a send buffer: the zero-copy path starves too)
/// and 56 bytes of 0x5a from a registered buffer.
struct sender {
    uct_ep_h  ep;
    bool      zcopy = false;
    void     *body  = nullptr; ///< registered, 56 bytes of 0x5a
    uct_mem_h memh  = UCT_MEM_HANDLE_NULL;
    ssize_t send(msg &m) const
    {
        if (!zcopy) {
            return uct_ep_am_bcopy(ep, am_id, msg::pack, &m, 0);
        }
        char hdr[8];
        std::memset(hdr, 0x5a, sizeof(hdr));
        std::memcpy(hdr, &m.index, 4);
        uct_iov_t iov = {body, 56, memh, 0, 1};
        ucs_status_t st = uct_ep_am_zcopy(ep, am_id, hdr, sizeof(hdr), &iov, 1, 0, nullptr);
        return (st == UCS_INPROGRESS) ? UCS_OK : st;
    }
};

struct pend {
    uct_pending_req_t super;
    const sender     *s;
    msg               m;
    bool              sent = false;
    static ucs_status_t cb(uct_pending_req_t *self)
    {
        auto *p   = reinterpret_cast<pend *>(self);
        ssize_t r = p->s->send(p->m);
        p->sent   = (r >= 0);
        return (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
    }
};

} // namespace

class starved_ops : public starved {
protected:
    void run(bool zcopy);
};

void starved_ops::run(bool zcopy)
{
    in_order sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, in_order::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region body = reg(4096, UCT_MD_MEM_ACCESS_LOCAL_READ);
    std::memset(body.addr, 0x5a, 56);
    sender snd{ep, zcopy, body.addr, body.memh};
    const uint32_t count = 2000;
    unsigned queued = 0, busy = 0;
    for (uint32_t i = 0; i < count; ++i) {
        msg m{i};
        for (;;) {
            ssize_t r = snd.send(m);
            if (r >= 0) {
                break;
            }
            ASSERT_EQ(UCS_ERR_NO_RESOURCE, r) << "message " << i;
            pend p;
            p.super.func = pend::cb;
            p.s          = &snd;
            p.m          = m;
            ucs_status_t st = uct_ep_pending_add(ep, &p.super, 0);
            if (st == UCS_ERR_BUSY) {
                // UCP sends again at once, without progress.
                ASSERT_LT(++busy, 100000u) << "pending_add answers BUSY while sends fail: "
                                              "a UCP sender would spin forever (message "
                                           << i << ")";
                continue;
            }
            ASSERT_EQ(UCS_OK, st);
            ++queued;
            ASSERT_TRUE(wait_for([&] { return p.sent; }, 30))
                    << "queued message " << i << " never went out";
            break;
        }
    }
    EXPECT_GT(queued, 0u) << "the buffers never ran out: the test proved nothing";
    ASSERT_TRUE(wait_for([&] { return sink.next == count; }, 60)) << sink.next << " of " << count;
    EXPECT_EQ(0u, sink.bad);
    ASSERT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    dereg(body);
}

TEST_P(starved_ops, out_of_send_buffers_queues_instead_of_spinning_and_loses_nothing)
{
    run(false);
}

TEST_P(starved_ops, out_of_header_buffers_am_zcopy_queues_instead_of_spinning)
{
    run(true);
}

INSTANTIATE_TEST_SUITE_P(tl, starved_ops, ::testing::Values("rc_zv", "ud_zv", "uc_zv"),
                         tl_param_name());

// rc_zv: more endpoints than the interface's send completion queue has
// entries (TX_CQ_LEN), each with a send below TX_MODERATION (unsignaled).
// Every posted WR holds an entry until a completion reports it, and only a
// signaled one does: without one on those queue pairs, the entries never
// come back and the other endpoints' sends wait forever (4,096 endpoints
// with the default TX_CQ_LEN of 4096 did, one message each).
class cq_starved : public starved {
protected:
    void SetUp() override
    {
        uct_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        close_side(m_a);
        open_side(m_a, {{"TX_QUEUE_LEN", "16"}, {"TX_CQ_LEN", "16"}, {"TX_MODERATION", "8"}});
    }
};

TEST_P(cq_starved, more_endpoints_than_completion_entries_all_send)
{
    struct counter {
        unsigned n = 0;
        static ucs_status_t handler(void *arg, void *, size_t, unsigned)
        {
            ++static_cast<counter *>(arg)->n;
            return UCS_OK;
        }
    } sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, counter::handler, &sink, 0));
    constexpr unsigned eps = 40, rounds = 2;
    std::vector<sender> snd;
    for (unsigned i = 0; i < eps; ++i) {
        uct_ep_h ep = connect(m_a, m_b);
        ASSERT_NE(nullptr, ep);
        snd.push_back(sender{ep});
    }
    std::vector<pend> pending(eps * rounds);
    unsigned queued = 0;
    for (unsigned r = 0; r < rounds; ++r) {
        for (unsigned i = 0; i < eps; ++i) {
            pend &p = pending[r * eps + i];
            p.super.func = pend::cb;
            p.s          = &snd[i];
            p.m          = msg{r * eps + i};
            ssize_t sent;
            ucs_status_t st = UCS_ERR_BUSY;
            while (((sent = snd[i].send(p.m)) < 0) &&
                   ((st = uct_ep_pending_add(snd[i].ep, &p.super, 0)) == UCS_ERR_BUSY)) {
            }
            ASSERT_TRUE((sent >= 0) || (st == UCS_OK)) << ucs_status_string(st);
            p.sent  = (sent >= 0);
            queued += (sent < 0);
            progress();
        }
    }
    EXPECT_GT(queued, 0u) << "the completion queue never filled: the test proved nothing";
    EXPECT_TRUE(wait_for([&] {
        return std::all_of(pending.begin(), pending.end(), [](const pend &p) { return p.sent; });
    }, 20)) << "queued sends never went out: their endpoints wait for completion entries "
               "held by unsignaled sends of other endpoints";
    EXPECT_TRUE(wait_for([&] { return sink.n == eps * rounds; }, 20))
            << sink.n << " of " << eps * rounds << " delivered";
    EXPECT_TRUE(wait_for([&] {
        return std::all_of(snd.begin(), snd.end(), [](const sender &s) {
            return uct_ep_flush(s.ep, 0, nullptr) == UCS_OK;
        });
    }, 20)) << "endpoints did not flush";
}

INSTANTIATE_TEST_SUITE_P(tl, cq_starved, ::testing::Values("rc_zv"),
                         tl_param_name());

} // namespace zv::test
