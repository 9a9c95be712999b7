// SPDX-License-Identifier: BSD-3-Clause
// iface::grh_source_matches: which sender a received GRH area names (an
// IB/RoCE v1 GRH or RoCE v2 IPv6 header, or RoCE v2's IPv4 header in the
// last 20 bytes), the check the handshakes use to refuse spoofed requests.
#include "iface/conn.h"

#include <gtest/gtest.h>

#include <cstring>

namespace zv::test {
namespace {

const uint8_t v4_gid[16]  = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 15};
const uint8_t v6_gid[16]  = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x7a, 0x76, 1};

struct grh_area {
    uint8_t b[40] = {};
    static grh_area ipv6(const uint8_t src[16])
    {
        grh_area g;
        g.b[0] = 0x60; // version 6
        std::memcpy(g.b + 8, src, 16);
        return g;
    }
    static grh_area ipv4(const uint8_t src[4])
    {
        grh_area g;    // 20 bytes of nothing, then the IPv4 header
        g.b[20] = 0x45; // version 4, IHL 5
        std::memcpy(g.b + 32, src, 4);
        return g;
    }
    const char *p() const { return reinterpret_cast<const char *>(b); }
};

TEST(grh_source, ipv6_grh_names_its_source_gid)
{
    EXPECT_TRUE(iface::grh_source_matches(grh_area::ipv6(v6_gid).p(), v6_gid));
    EXPECT_FALSE(iface::grh_source_matches(grh_area::ipv6(v6_gid).p(), v4_gid));
    uint8_t other[16];
    std::memcpy(other, v6_gid, 16);
    other[15] ^= 1;
    EXPECT_FALSE(iface::grh_source_matches(grh_area::ipv6(other).p(), v6_gid));
    // A RoCE v1 / IB GRH of an IPv4-mapped GID is still a GRH.
    EXPECT_TRUE(iface::grh_source_matches(grh_area::ipv6(v4_gid).p(), v4_gid));
}

TEST(grh_source, ipv4_header_names_the_mapped_address)
{
    const uint8_t ip[4] = {10, 0, 2, 15}, other[4] = {192, 0, 2, 77};
    EXPECT_TRUE(iface::grh_source_matches(grh_area::ipv4(ip).p(), v4_gid));
    EXPECT_FALSE(iface::grh_source_matches(grh_area::ipv4(other).p(), v4_gid));
    // An IPv4 packet cannot come from an IPv6 GID, even one ending alike.
    uint8_t v6_same_tail[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 2, 15};
    EXPECT_FALSE(iface::grh_source_matches(grh_area::ipv4(ip).p(), v6_same_tail));
}

TEST(grh_source, an_area_that_is_neither_has_nothing_to_check)
{
    grh_area none;
    EXPECT_TRUE(iface::grh_source_matches(none.p(), v4_gid));
}

} // namespace
} // namespace zv::test
