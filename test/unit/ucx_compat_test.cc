// SPDX-License-Identifier: BSD-3-Clause
// The UCX compatibility layer (src/ucx/compat.h) against the UCX this tree
// is built with, and the peer comparison of ep_is_connected.
#include "iface/zv_iface.h"
#include "ucx/compat.h"

#include <gtest/gtest.h>

#include <cstring>

namespace zv::test {

namespace {

unsigned count_call(void *arg)
{
    ++*static_cast<int *>(arg);
    return 1;
}

iface::device_addr addr(bool roce, uint16_t lid, uint8_t prefix, uint8_t id)
{
    iface::device_addr a{};
    a.flags  = roce ? 1 : 0;
    a.lid    = lid;
    a.gid[0] = prefix;
    a.gid[15] = id;
    return a;
}

} // namespace

TEST(ucx_compat, oneshot_runs_once)
{
    ucs_callbackq_t cbq;
    ASSERT_EQ(UCS_OK, ucs_callbackq_init(&cbq));
    int calls = 0;
    int key   = 0;
    ucx::oneshot_add(&cbq, &key, count_call, &calls);
    ucs_callbackq_dispatch(&cbq);
    ucs_callbackq_dispatch(&cbq);
    EXPECT_EQ(1, calls);
    ucs_callbackq_cleanup(&cbq);
}

TEST(ucx_compat, oneshot_cancelled_never_runs)
{
    ucs_callbackq_t cbq;
    ASSERT_EQ(UCS_OK, ucs_callbackq_init(&cbq));
    int calls = 0;
    int key   = 0;
    int token = ucx::oneshot_add(&cbq, &key, count_call, &calls);
    ucx::oneshot_cancel(&cbq, &key, token);
    ucs_callbackq_dispatch(&cbq);
    ucs_callbackq_dispatch(&cbq);
    EXPECT_EQ(0, calls);
    ucs_callbackq_cleanup(&cbq);
}

TEST(ucx_compat, md_attr_filled_from_caps)
{
    ucx::md_caps caps;
    caps.flags            = UCT_MD_FLAG_REG;
    caps.max_reg          = 1234;
    caps.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    caps.rkey_packed_size = 4;
    caps.component_name   = "zv";
    caps.device_name      = "rxe0";
    ucx::md_attr_t attr;
    std::memset(&attr, 0xff, sizeof(attr));
    ucx::fill_md_attr(&attr, caps);
    EXPECT_EQ(4u, attr.rkey_packed_size);
    EXPECT_STREQ("zv", attr.component_name);
    // Where UCX keeps the rest differs by version (attr.cap.* in 1.13);
    // UCP reads it through uct_md_query in the device tier.
}

TEST(ucx_compat, reach_reason_writes_only_where_asked)
{
    ucx::reach_reason none;
    none.say("%s", "nothing happens");
    char buf[8];
    ucx::reach_reason why{buf, sizeof(buf)};
    why.say("%s", "a long reason");
    EXPECT_STREQ("a long ", buf);
}

TEST(ucx_compat, iface_flag_inter_node_matches_ucx)
{
#ifdef UCT_IFACE_FLAG_INTER_NODE
    EXPECT_EQ(static_cast<uint64_t>(UCT_IFACE_FLAG_INTER_NODE), ucx::iface_flag_inter_node);
#else
    EXPECT_EQ(0u, ucx::iface_flag_inter_node);
#endif
}

namespace {
ucs_status_t no_perf(uct_iface_h, uct_perf_attr_t *) { return UCS_ERR_UNSUPPORTED; }
void no_vfs(uct_iface_h) {}
ucs_status_t no_ep_query(uct_ep_h, uct_ep_attr_t *) { return UCS_ERR_UNSUPPORTED; }
int never_reachable(uct_iface_h, const uct_device_addr_t *, const uct_iface_addr_t *, bool,
                    const zv::ucx::reach_reason &)
{
    return 0;
}
int never_connected(uct_ep_h, const uct_device_addr_t *, const uct_iface_addr_t *) { return 0; }
} // namespace

/// Every internal op the UCX built against asserts or calls without a NULL
/// check is filled (Debian unstable's libuct asserts ep_outstanding_purge
/// when an interface opens: ud_zv and uc_zv aborted there, in every MPI
/// job), and the ones zv does not implement say so.
TEST(ucx_compat, internal_ops_has_every_member_ucx_calls)
{
    constexpr uct_iface_internal_ops_t ops =
            zv::ucx::make_internal_ops<no_perf, no_vfs, no_ep_query, never_reachable,
                                       never_connected>();
    EXPECT_NE(nullptr, ops.iface_estimate_perf);
    EXPECT_NE(nullptr, ops.iface_vfs_refresh);
    EXPECT_NE(nullptr, ops.ep_query);
    EXPECT_NE(nullptr, ops.ep_invalidate);
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_CONNECT_TO_EP_V2
    EXPECT_NE(nullptr, ops.ep_connect_to_ep_v2);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
    EXPECT_NE(nullptr, ops.iface_is_reachable_v2);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
    EXPECT_NE(nullptr, ops.ep_is_connected);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_QUERY_V2
    EXPECT_NE(nullptr, ops.iface_query_v2);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_GET_DEVICE_EP
    EXPECT_NE(nullptr, ops.ep_get_device_ep);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_PUT_SGL_ZCOPY
    EXPECT_NE(nullptr, ops.ep_put_sgl_zcopy);
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_OUTSTANDING_PURGE
    ASSERT_NE(nullptr, ops.ep_outstanding_purge);
    uct_ep_outstanding_purge_params_t params = {};
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, ops.ep_outstanding_purge(nullptr, &params));
#endif
}

TEST(same_device, roce_compares_the_whole_gid)
{
    EXPECT_TRUE(iface::same_device(addr(true, 0, 1, 2), addr(true, 7, 1, 2)));
    EXPECT_FALSE(iface::same_device(addr(true, 0, 1, 2), addr(true, 0, 3, 2)));
    EXPECT_FALSE(iface::same_device(addr(true, 0, 1, 2), addr(true, 0, 1, 3)));
}

TEST(same_device, infiniband_compares_lid_and_interface_id)
{
    // The subnet prefix does not name the port; LID and interface id do.
    EXPECT_TRUE(iface::same_device(addr(false, 5, 1, 2), addr(false, 5, 9, 2)));
    EXPECT_FALSE(iface::same_device(addr(false, 5, 1, 2), addr(false, 6, 1, 2)));
    EXPECT_FALSE(iface::same_device(addr(false, 5, 1, 2), addr(false, 5, 1, 3)));
}

TEST(same_device, link_layers_differ)
{
    EXPECT_FALSE(iface::same_device(addr(true, 5, 1, 2), addr(false, 5, 1, 2)));
    iface::device_addr a = addr(false, 5, 1, 2);
    EXPECT_TRUE(iface::same_device(a, reinterpret_cast<const uct_device_addr_t *>(&a)));
}

} // namespace zv::test
