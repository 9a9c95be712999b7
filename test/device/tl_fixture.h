// SPDX-License-Identifier: BSD-3-Clause
// Behaviour fixtures: a device test parameterised by transport, the
// transport lists a behaviour is instantiated for, and the senders and
// sinks the behaviours share.
#ifndef ZV_TEST_DEVICE_TL_FIXTURE_H
#define ZV_TEST_DEVICE_TL_FIXTURE_H

#include "test_util.h"
#include "uct_fixture.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zv::test {

// A behaviour is instantiated for the transports that have it (as UCX's
// UCT_INSTANTIATE_TEST_CASE, but never skipped at run time: the device
// tier fails on a skipped test). Each fixture says what it needs of the
// transport (tl_test_t::needs()), and SetUp fails a transport of its list
// that does not advertise it: a list out of step with the code shows.
#define ZV_TLS_ALL "rc_zv", "ud_zv", "uc_zv"
/// RDMA WRITE (put short, bcopy, zcopy).
#define ZV_TLS_PUT "rc_zv", "uc_zv"
/// The device's reliability: RDMA READ, atomics, remote access errors,
/// a shared receive queue, a connection manager (src/rc).
#define ZV_TLS_RC "rc_zv"
/// The software reliability layer (src/rd): window, acknowledgements,
/// resends, the async side, fault injection (UCX_*_ZV_FAULT_*).
#define ZV_TLS_RD "ud_zv", "uc_zv"
/// Instantiate 'fixture' for the transports listed (ZV_TLS_* or names).
#define ZV_INSTANTIATE(fixture, ...) \
    INSTANTIATE_TEST_SUITE_P(tl, fixture, ::testing::Values(__VA_ARGS__), tl_param_name())

/// The AM id the behaviour fixtures' senders and sinks use.
constexpr uint8_t am_id = 11;

/// A device test of the transport named by its parameter (the parameter,
/// or the first member of a tuple parameter).
template <typename Param>
class tl_test_t : public uct_test, public ::testing::WithParamInterface<Param> {
protected:
    const char *tl_name() const override { return tl_of(this->GetParam()); }
    bool is(const char *tl) const { return std::strcmp(tl_name(), tl) == 0; }
    /// ud_zv or uc_zv: the software reliability layer.
    bool is_rd() const { return !is("rc_zv"); }
    bool is_uc() const { return is("uc_zv"); }

    /// UCT_IFACE_FLAG_* the behaviour needs (SetUp fails without them).
    virtual uint64_t needs() const { return UCT_IFACE_FLAG_AM_SHORT; }
    /// UCT_IFACE_FLAG_EVENT_* it needs.
    virtual uint64_t needs_events() const { return 0; }

    void SetUp() override
    {
        uct_test::SetUp();
        if (this->IsSkipped() || this->HasFatalFailure()) {
            return;
        }
        ASSERT_EQ(needs(), m_a.attr.cap.flags & needs())
                << tl_name() << " lacks a capability this behaviour needs: the fixture "
                                "is instantiated for a transport that does not have it";
        ASSERT_EQ(needs_events(), m_a.attr.cap.event_flags & needs_events())
                << tl_name() << " lacks an event this behaviour needs";
    }

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

    /// Interfaces c (opened with 'c_cfg') and d (with 'd_cfg'), d keeping
    /// the values of its messages in 'sink', and an endpoint of c to d over
    /// which 10 messages were delivered (null on failure, which is reported).
    uct_ep_h delivering_pair(uct_side &c,
                             const std::vector<std::pair<const char *, const char *>> &c_cfg,
                             uct_side &d,
                             const std::vector<std::pair<const char *, const char *>> &d_cfg,
                             am_values &sink);

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

    /// An AM handler that counts into the unsigned at 'arg'.
    static ucs_status_t count_am(void *arg, void *, size_t, unsigned)
    {
        ++*static_cast<unsigned *>(arg);
        return UCS_OK;
    }

private:
    static const char *tl_of(const char *p) { return p; }
    template <typename... T> static const char *tl_of(const std::tuple<const char *, T...> &p)
    {
        return std::get<0>(p);
    }
};

/// The fixture of a behaviour parameterised by transport alone.
using tl_test = tl_test_t<const char *>;

/// Each message: [uint32 index][pattern seeded by index]; the receiver
/// checks order, count and content.
struct ordered_sink {
    unsigned    next = 0;
    unsigned    bad  = 0;
    std::string first_error;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned);
    void note(const std::string &what);
};

struct msg_pack {
    uint32_t index;
    size_t   length; // payload after the index
};

/// Packs a msg_pack (the index, then the pattern seeded by it).
size_t pack_msg(void *dest, void *arg);

/// A send of message 'i' did not go: progress 'sides' if the endpoint had
/// no resources; any other status is a failure (false).
bool refused(ucs_status_t status, uint64_t i, const std::vector<uct_side *> &sides);

/// Send 'count' messages of varying size from 'ep' (bcopy, short every
/// third), AM am_id, for an ordered_sink; returns false if the sender got
/// stuck.
bool send_ordered(uct_ep_h ep, unsigned count, size_t max_payload,
                  const std::vector<uct_side *> &sides, double timeout = 120);

/// Send n active messages (am_short, AM am_id, headers 0..n-1) on ep and
/// wait until 'to' counted them.
bool deliver(uct_ep_h ep, unsigned n, am_values &to, std::vector<uct_side *> sides);

/// Post am_shorts (AM am_id) with headers next, next+1, ... up to 'end'
/// (excluded), progressing 'sides' while the endpoint has no resources;
/// stops after 'timeout' s. Returns false on an error.
bool send_values(uct_ep_h ep, uint64_t &next, uint64_t end, const std::vector<uct_side *> &sides,
                 double timeout);

template <typename Param>
uct_ep_h tl_test_t<Param>::delivering_pair(
        uct_side &c, const std::vector<std::pair<const char *, const char *>> &c_cfg,
        uct_side &d, const std::vector<std::pair<const char *, const char *>> &d_cfg,
        am_values &sink)
{
    open_side(c, c_cfg);
    open_side(d, d_cfg);
    EXPECT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, am_values::handler, &sink, 0));
    uct_ep_h ep = create_ep(c, d);
    if (this->HasFailure() || !deliver(ep, 10, sink, {&c, &d})) {
        ADD_FAILURE() << "10 messages were not delivered";
        if (ep != nullptr) {
            uct_ep_destroy(ep);
        }
        return nullptr;
    }
    return ep;
}

} // namespace zv::test

#endif
