// SPDX-License-Identifier: BSD-3-Clause
// Opening an interface, on every zv transport: what it advertises, the
// parameters it refuses, the async mode it runs in; and the memory domain
// that interfaces open on.
#include "tl_fixture.h"
#include "log_guard.h"

#include <string>
#include <vector>

namespace zv::test {

namespace {

class iface : public tl_test {
protected:
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

} // namespace

/// What each transport implements, and only that, is what it advertises:
/// all three connect to an interface and have active messages and pending;
/// rc_zv has RDMA WRITE and READ, uc_zv RDMA WRITE only (no reads, no
/// atomics), ud_zv no RDMA.
TEST_P(iface, advertises_what_it_implements)
{
    const uint64_t f = m_a.attr.cap.flags;
    EXPECT_TRUE(f & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_BCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_ZCOPY);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_PENDING);
    if (!is_rd()) {
        EXPECT_TRUE(f & UCT_IFACE_FLAG_PUT_ZCOPY);
        EXPECT_TRUE(f & UCT_IFACE_FLAG_GET_ZCOPY);
        EXPECT_FALSE(f & UCT_IFACE_FLAG_CONNECT_TO_EP);
        EXPECT_GT(m_a.attr.bandwidth.shared, 0);
        EXPECT_EQ(19u, m_a.attr.device_addr_len);
        return;
    }
    EXPECT_TRUE(f & UCT_IFACE_FLAG_AM_SHORT);
    EXPECT_TRUE(f & UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE);
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

/// An interface opened with an invalid AM alignment or offset is refused
/// (UCS_ERR_INVALID_PARAM, with an error log) and leaves nothing behind:
/// the memory domain then closes without complaint. A valid one opens.
TEST_P(iface, an_invalid_am_alignment_is_refused_at_open)
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

/// UCX_ASYNC_MODE=signal: no async side (a signal handler must not poll
/// the device or allocate), said once per process as a warning naming the
/// mode; the transport works as before, progressing when the worker does.
TEST_P(iface, signal_mode_is_named_once_and_the_transport_works)
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

ZV_INSTANTIATE(iface, ZV_TLS_ALL);

namespace {

/// The memory domain alone (opened by uct_test for its default transport).
class md_monitor : public uct_test {};

} // namespace


/// The registration cache's invalidation source is chosen once per process,
/// by the first md opened: a later md that asks for another one is told so,
/// once, and works with the first one's.
TEST_F(md_monitor, a_later_md_asking_for_another_monitor_is_warned_once)
{
    expect_log_problems logs;
    // One of the two differs from whatever the first md chose.
    for (const char *kind : {"none", "uffd", "none", "uffd"}) {
        uct_md_config_t *cfg;
        ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, nullptr, nullptr, &cfg));
        ASSERT_EQ(UCS_OK, config_modify(cfg, "ZV_", "RCACHE_MONITOR", kind));
        uct_md_h md;
        ucs_status_t status = uct_md_open(m_component, m_md_name.c_str(), cfg, &md);
        uct_config_release(cfg);
        ASSERT_EQ(UCS_OK, status) << kind;
        uct_md_close(md);
    }
    EXPECT_EQ(1u, logs.matching("is chosen once per process")) << logs.text();
    EXPECT_TRUE(logged_only(logs, "UCX_ZV_RCACHE_MONITOR="));
}


} // namespace zv::test
