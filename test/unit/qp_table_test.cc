// SPDX-License-Identifier: BSD-3-Clause
// iface::qp_table: what a completion's QP number belongs to (uc_zv's
// lookup of every received packet).
#include "iface/qp_table.h"

#include <gtest/gtest.h>

namespace zv::test {
namespace {

struct objs {
    int conn = 0;
    int ep   = 0;
};

TEST(qp_table, finds_what_was_added_and_nothing_else)
{
    iface::qp_table<objs> t;
    EXPECT_EQ(0, t.find(17).conn) << "empty table";
    ASSERT_TRUE(t.add(17, {1, 0}));
    ASSERT_TRUE(t.add(18, {2, 3}));
    // Far apart: another chunk (the high 12 bits of the 24-bit number).
    ASSERT_TRUE(t.add(0xfff012, {4, 5}));
    EXPECT_EQ(1, t.find(17).conn);
    EXPECT_EQ(3, t.find(18).ep);
    EXPECT_EQ(4, t.find(0xfff012).conn);
    EXPECT_EQ(0, t.find(19).conn) << "a neighbour never added";
    EXPECT_EQ(0, t.find(0x001011).conn) << "the same low bits, another chunk";
    t.at(17).ep = 6;
    EXPECT_EQ(6, t.find(17).ep);
}

TEST(qp_table, a_removed_qp_is_gone_and_its_neighbours_stay)
{
    iface::qp_table<objs> t;
    ASSERT_TRUE(t.add(0x000100, {1, 1}));
    ASSERT_TRUE(t.add(0x000101, {2, 2}));
    t.remove(0x000100);
    EXPECT_EQ(0, t.find(0x000100).conn);
    EXPECT_EQ(2, t.find(0x000101).conn);
    t.remove(0x000101); // the chunk's last: the chunk goes too
    EXPECT_EQ(0, t.find(0x000101).conn);
    // ...and comes back for the next QP there.
    ASSERT_TRUE(t.add(0x000102, {3, 3}));
    EXPECT_EQ(3, t.find(0x000102).conn);
    EXPECT_EQ(0, t.find(0x000101).conn);
}

} // namespace
} // namespace zv::test
