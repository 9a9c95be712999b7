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

#include <cstring>
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

struct pend {
    uct_pending_req_t super;
    uct_ep_h          ep;
    msg               m;
    bool              sent = false;
    static ucs_status_t cb(uct_pending_req_t *self)
    {
        auto *p = reinterpret_cast<pend *>(self);
        ssize_t r = uct_ep_am_bcopy(p->ep, am_id, msg::pack, &p->m, 0);
        p->sent   = (r >= 0);
        return (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
    }
};

} // namespace

TEST_P(starved, out_of_send_buffers_queues_instead_of_spinning_and_loses_nothing)
{
    in_order sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, in_order::handler, &sink, 0));
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const uint32_t count = 2000;
    unsigned queued = 0, busy = 0;
    for (uint32_t i = 0; i < count; ++i) {
        msg m{i};
        for (;;) {
            ssize_t r = uct_ep_am_bcopy(ep, am_id, msg::pack, &m, 0);
            if (r >= 0) {
                break;
            }
            ASSERT_EQ(UCS_ERR_NO_RESOURCE, r) << "message " << i;
            pend p;
            p.super.func = pend::cb;
            p.ep         = ep;
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
}

INSTANTIATE_TEST_SUITE_P(tl, starved, ::testing::Values("rc_zv", "ud_zv", "uc_zv"));

} // namespace zv::test
