// SPDX-License-Identifier: BSD-3-Clause
// What UCT's callers (UCP) rely on, over every zv transport: a destroyed
// endpoint has completed its operations, and bad input is refused without
// harm to the connection (UCX's test_uct_ep, uct_p2p_err_test and
// uct_p2p_am_alignment ask the same of UCX's own transports).
#include "test_util.h"
#include "uct_fixture.h"
#include "log_guard.h"

#include "rd/rd_iface.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 13;

class uct_contract : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    bool is_rd() const { return std::string(GetParam()) != "rc_zv"; }

    /// An endpoint of 'from' to 'to', connected (progressing both), that
    /// the test destroys itself.
    uct_ep_h connected_ep(uct_side &from, uct_side &to)
    {
        uct_ep_h ep = create_ep(from, to);
        EXPECT_TRUE(run_until({&from, &to}, [&] {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        })) << "the endpoint did not connect";
        return ep;
    }

    /// A message sent on 'ep' (AM 'id') now arrives at m_b, and the
    /// endpoint flushes: the connection still works.
    void expect_connection_works(uct_ep_h ep, uint64_t value, uint8_t id = am_id)
    {
        am_values sink;
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, id, am_values::handler,
                                                   &sink, 0));
        ucs_status_t st = UCS_ERR_NO_RESOURCE;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(ep, id, value, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        }, 10));
        ASSERT_EQ(UCS_OK, st);
        EXPECT_TRUE(wait_for([&] { return !sink.got.empty(); }, 10))
                << "a good message after the refused one was not delivered";
        EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10))
                << "the endpoint does not flush";
        if (!sink.got.empty()) {
            EXPECT_EQ(value, sink.got.front());
        }
        EXPECT_EQ(0u, s_ep_errors) << "an endpoint failed: "
                                   << ucs_status_string(s_last_ep_error);
    }

    /// uct_iface_open() on m_dev with 'mask', 'align', 'offset' for the AM
    /// alignment fields.
    ucs_status_t try_open(uct_side &side, uint64_t mask, size_t align, size_t offset)
    {
        return try_open_side(side, {}, [&](uct_iface_params_t &params) {
            params.field_mask     |= mask;
            params.am_alignment    = align;
            params.am_align_offset = offset;
        });
    }
};

size_t pack_nothing(void *, void *) { return 0; }

} // namespace

// ---------------------------------------------------------------- item 1

namespace {

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

} // namespace

/// uct_ep_destroy() with zero-copy sends outstanding (posted, not flushed,
/// no progress since) has called every one's completion when it returns,
/// and a pending flush's, as UCP's forced close relies on (UCX's
/// test_uct_ep.destroy_entity_after_send). Each completion comes only once
/// no work request can read the send's buffer: each poisons its buffer,
/// and the peer never receives the poison. On ud_zv and uc_zv the
/// destroyed endpoint keeps nothing that waits for the device (it is not
/// left in the graveyard).
TEST_P(uct_contract, a_destroyed_endpoint_has_completed_its_zero_copy_sends)
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

namespace {

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

/// The same when the endpoint is destroyed from a completion callback,
/// inside progress: its sends have not been acknowledged (its peer does
/// not progress), some may still be in the send queue.
TEST_P(uct_contract, an_endpoint_destroyed_inside_progress_has_completed_its_sends)
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

// ---------------------------------------------------------------- item 5

/// An interface opened with an invalid AM alignment or offset is refused
/// (UCS_ERR_INVALID_PARAM, with an error log) and leaves nothing behind:
/// the memory domain then closes without complaint. A valid one opens.
TEST_P(uct_contract, an_invalid_am_alignment_is_refused_at_open)
{
    struct bad {
        uint64_t mask;
        size_t   align, offset;
    };
    const uint64_t A = UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT;
    const uint64_t O = UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    // (as uct_p2p_am_alignment.invalid_align / invalid_offset)
    for (const bad &b : {bad{A, 0, 0}, bad{A, 3, 1}, bad{O, 0, 11}, bad{A | O, 8, 8},
                         bad{A | O, 8, 11}, bad{A | O, 4096 + 1, 0}}) {
        SCOPED_TRACE("alignment " + std::to_string(b.align) + " offset " +
                     std::to_string(b.offset) + ((b.mask & A) ? "" : " (offset only)"));
        uct_side s;
        ucs_status_t status;
        std::vector<std::string> logged;
        {
            expect_log_problems logs;
            status = try_open(s, b.mask, b.align, b.offset);
            logged = logs.expected();
        }
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << ucs_status_string(status);
        EXPECT_FALSE(logged.empty()) << "refused without saying why";
        close_side(s); // (opened: the defect; close it all the same)
    }
    {
        uct_side s;
        EXPECT_EQ(UCS_OK, try_open(s, A | O, 64, 8));
        close_side(s);
        EXPECT_EQ(UCS_OK, try_open(s, A, 1, 0));
        close_side(s);
    }
    expect_md_closes_cleanly(); // nothing was left on the device
}

/// An interface opened with an AM alignment delivers every active message
/// it receives (short, bcopy, zero-copy; the data in a receive descriptor)
/// with data + am_align_offset on that boundary, as UCT promises
/// (uct_p2p_am_alignment.align_*, which every zv transport failed).
TEST_P(uct_contract, received_active_messages_are_aligned_as_the_interface_asked)
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
TEST_P(uct_contract, a_send_with_an_invalid_am_id_is_refused_and_the_connection_keeps_working)
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
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        expect_log_problems logs;
        ucs_status_t st = op.second();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, st) << ucs_status_string(st);
        EXPECT_GT(logs.matching("active message id"), 0u) << logs.text();
        EXPECT_EQ(0u, logs.others("active message id")) << logs.text();
    }
    expect_connection_works(ep, 0x51);
    dereg(r);
}

/// A short send one byte over its maximum (max_short counts the 8-byte AM
/// header, as UCT's does) is refused with an error log naming the length,
/// and so is an am_short_iov and a put_short one byte over: nothing reaches
/// the device (rc_zv's put_short used to fail its post), and the connection
/// goes on.
TEST_P(uct_contract, an_oversized_short_send_is_refused_and_the_connection_keeps_working)
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
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        expect_log_problems logs;
        ucs_status_t st = op.second();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, st) << ucs_status_string(st);
        EXPECT_GT(logs.matching("length"), 0u) << logs.text();
        EXPECT_EQ(0u, logs.others("length")) << logs.text();
    }
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

// ---------------------------------------------------------------- item 2

namespace {

/// A pending request that makes progress a few times (UCS_INPROGRESS)
/// before it sends, as UCX's test_uct_pending's requests do.
struct slow_request {
    uct_pending_req_t super;
    uct_ep_h          ep;
    uint64_t          value;
    int               countdown = 5;
    unsigned         *left;

    /// A request to send 'value' on 'ep'; 'left' counts those not yet sent.
    static slow_request *make(uct_ep_h ep, uint64_t value, unsigned *left)
    {
        auto *r       = new slow_request{};
        r->super.func = cb;
        r->ep         = ep;
        r->value      = value;
        r->left       = left;
        return r;
    }

    static ucs_status_t cb(uct_pending_req_t *self)
    {
        auto *r = reinterpret_cast<slow_request *>(self);
        if (r->countdown > 0) {
            --r->countdown;
            return UCS_INPROGRESS;
        }
        ucs_status_t st = uct_ep_am_short(r->ep, am_id, r->value, nullptr, 0);
        if (st == UCS_OK) {
            --*r->left;
            delete r;
        }
        return st;
    }
};

} // namespace

/// Sends until the resources run out, every refused one queued as a
/// pending request that answers UCS_INPROGRESS five times before it sends:
/// all of them go out, in order, whatever the dispatch's budget and however
/// few send completions the last of them make (UCX's
/// test_uct_pending.pending_op, which hung over rc_zv).
TEST_P(uct_contract, slow_pending_requests_all_go_out_in_order)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    uint64_t n       = 0;
    unsigned pending = 0;
    auto end         = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while ((n < 10000) && (std::chrono::steady_clock::now() < end)) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, n, nullptr, 0);
        if (st == UCS_ERR_NO_RESOURCE) {
            auto *r = slow_request::make(ep, n, &pending);
            st = uct_ep_pending_add(ep, &r->super, 0);
            if (st == UCS_ERR_BUSY) {
                delete r;
                continue; // resources came back: send it now
            }
            ASSERT_EQ(UCS_OK, st);
            ++pending;
        } else {
            ASSERT_EQ(UCS_OK, st);
        }
        ++n;
    }
    ASSERT_GT(pending, 0u) << "the resources never ran out in 3 s";
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] { return sink.got.size() == n; }, 30))
            << sink.got.size() << " of " << n << " arrived, " << pending
            << " requests still pending";
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        ASSERT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_EQ(0u, pending);
    EXPECT_EQ(0u, s_ep_errors);
}

/// A send does not overtake the endpoint's pending requests, even when the
/// resources came back without the worker (the async side took the peer's
/// acknowledgements while the application computed): UCX's
/// test_uct_pending.send_ooo_with_pending, which uc_zv failed.
TEST_P(uct_contract, a_send_does_not_overtake_a_pending_request)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &sink, 0));
    uint64_t n    = 0;
    unsigned left = 0;
    auto end      = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    ucs_status_t st;
    while ((st = uct_ep_am_short(ep, am_id, n, nullptr, 0)) == UCS_OK) {
        ++n;
        ASSERT_LT(std::chrono::steady_clock::now(), end) << "the resources never ran out";
    }
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, st);
    auto *r = slow_request::make(ep, n++, &left);
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &r->super, 0));
    ++left;
    // Only the receiver progresses for a while: it acknowledges, and this
    // side's async side may take the acknowledgements.
    run_until({&m_b}, [] { return false; }, 1.5);
    // The next message goes after the queued one, whatever the resources.
    ASSERT_TRUE(wait_for([&] {
        return (st = uct_ep_am_short(ep, am_id, n, nullptr, 0)) != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_EQ(UCS_OK, st);
    ++n;
    EXPECT_TRUE(run_until({&m_a, &m_b}, [&] { return sink.got.size() == n; }, 30))
            << sink.got.size() << " of " << n << " arrived";
    for (uint64_t i = 0; i < sink.got.size(); ++i) {
        ASSERT_EQ(i, sink.got[i]) << "out of order";
    }
    EXPECT_EQ(0u, left);
    EXPECT_EQ(0u, s_ep_errors);
}

/// A new endpoint takes sends at once, before its connection exists, as
/// UCX's transports do once connected (uct_p2p_am_alignment sends right
/// after uct_ep_create, and UCP's wireup sends its first message so):
/// what is sent waits for the connection and arrives in order, a zero-copy
/// send completes once acknowledged, and a flush covers them.
TEST_P(uct_contract, a_new_endpoint_takes_sends_at_once_and_delivers_them_once_connected)
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
TEST_P(uct_contract, an_endpoint_destroyed_while_it_connects_cancels_what_it_sent)
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

/// UCX_ASYNC_MODE=signal: no async side (a signal handler must not poll
/// the device or allocate), said once per process as a warning naming the
/// mode; the transport works as before, progressing when the worker does.
TEST_P(uct_contract, signal_mode_is_named_once_and_the_transport_works)
{
    static bool said = false; // by an earlier transport of this process
    uct_side c;
    {
        expect_log_problems logs;
        open_side(c, {}, UCS_ASYNC_MODE_SIGNAL);
        const size_t named = logs.matching("UCX_ASYNC_MODE=signal");
        EXPECT_EQ(said ? 0u : 1u, named) << logs.text();
        EXPECT_EQ(0u, logs.others("UCX_ASYNC_MODE=signal")) << logs.text();
        said = said || (named > 0);
    }
    am_values sink;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(c.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = connected_ep(m_a, c);
    ucs_status_t st = UCS_ERR_NO_RESOURCE;
    EXPECT_TRUE(run_until({&m_a, &c}, [&] {
        if (st == UCS_ERR_NO_RESOURCE) {
            st = uct_ep_am_short(ep, am_id, 0x53, nullptr, 0);
        }
        return !sink.got.empty();
    }, 10)) << ucs_status_string(st);
    EXPECT_EQ(std::vector<uint64_t>{0x53}, sink.got);
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    close_side(c);
}

/// UCP's keepalive calls uct_ep_check() on every transport (UCX 1.13 does
/// not look at UCT_IFACE_FLAG_EP_CHECK there): the zv transports had none,
/// and every UCP job with UCP_ERR_HANDLING_MODE_PEER jumped to address 0.
/// It answers on a live connection; over rc_zv, it finds a peer that is gone
/// (a zero-length RDMA WRITE whose retries run out).
TEST_P(uct_contract, ep_check_answers_and_rc_zv_finds_a_gone_peer)
{
    uct_side c, d;
    if (is_rd()) {
        open_side(c);
    } else {
        open_side(c, {{"TIMEOUT", "20ms"}, {"RETRY_COUNT", "3"}});
    }
    open_side(d);
    uct_ep_h ep = connected_ep(c, d);
    EXPECT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
    EXPECT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    EXPECT_EQ(0u, s_ep_errors) << "a live peer was found dead";
    if (!is_rd()) {
        expect_log_problems logs; // (a failure may be logged, as any)
        close_side(d);            // gone, with its QPs
        EXPECT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
        EXPECT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 30))
                << "the gone peer was not found";
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error)
                << ucs_status_string(s_last_ep_error) << logs.text();
    }
    uct_ep_destroy(ep);
}

INSTANTIATE_TEST_SUITE_P(tl, uct_contract, ::testing::Values("rc_zv", "ud_zv", "uc_zv"));

} // namespace zv::test
