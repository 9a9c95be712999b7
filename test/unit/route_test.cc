// SPDX-License-Identifier: BSD-3-Clause
// RoCE reachability (verbs/route.h): the decision from what the kernel
// says, and the kernel's answer on this machine's own interfaces.
#include "verbs/route.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <cstring>

namespace zv::test {

namespace {

uint32_t ip(const char *s)
{
    in_addr a{};
    EXPECT_EQ(1, inet_pton(AF_INET, s, &a)) << s;
    return a.s_addr;
}

/// ::ffff:a.b.c.d, as a RoCE v2 GID of an IPv4 address.
struct gid {
    uint8_t raw[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
    explicit gid(uint32_t addr) { std::memcpy(raw + 12, &addr, 4); }
};

/// A non-loopback IPv4 address of this machine, or 0.
uint32_t other_local_address()
{
    ifaddrs *list = nullptr;
    uint32_t found = 0;
    if (getifaddrs(&list) != 0) {
        return 0;
    }
    for (ifaddrs *i = list; (i != nullptr) && (found == 0); i = i->ifa_next) {
        if ((i->ifa_addr != nullptr) && (i->ifa_addr->sa_family == AF_INET) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            found = reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr;
        }
    }
    freeifaddrs(list);
    return found;
}

} // namespace

TEST(roce_reach, only_ipv4_mapped_gids_hold_an_address)
{
    uint32_t a = 0;
    EXPECT_TRUE(verbs::gid_ipv4(gid(ip("10.0.2.15")).raw, &a));
    EXPECT_EQ(ip("10.0.2.15"), a);
    uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x7a, 0x76, 1};
    EXPECT_FALSE(verbs::gid_ipv4(link_local, &a));
}

TEST(roce_reach, decided_by_subnet_then_by_the_route_out_of_the_port)
{
    const uint32_t me = ip("10.0.2.15"), mask = ip("255.255.255.0");
    const int eth0 = 2, eth1 = 3, lo = 1;
    // The port's own network: no route needed.
    EXPECT_TRUE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.0.2.16"), false, 0, 0));
    // Another rail's network, or an address of the other rail's NIC here.
    EXPECT_FALSE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.0.3.16"), true, RTN_UNICAST, eth1));
    EXPECT_FALSE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.0.3.15"), true, RTN_LOCAL, lo));
    // Routed RoCE v2: through a gateway on the port's own network.
    EXPECT_TRUE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.7.0.1"), true, RTN_UNICAST, eth0));
    EXPECT_FALSE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.7.0.1"), true, RTN_UNREACHABLE, 0));
    // The kernel cannot say: not refused.
    EXPECT_TRUE(verbs::ipv4_reach::decide(me, mask, eth0, ip("10.7.0.1"), false, 0, 0));
}

TEST(roce_reach, the_kernel_routes_an_own_address_locally)
{
    unsigned type = 0;
    int      oif  = -1;
    ASSERT_TRUE(verbs::ipv4_route(ip("127.0.0.1"), ip("127.0.0.1"), &type, &oif));
    EXPECT_EQ(static_cast<unsigned>(RTN_LOCAL), type);
    EXPECT_EQ(static_cast<int>(if_nametoindex("lo")), oif);
}

TEST(roce_reach, an_address_of_another_interface_here_is_not_reachable_from_a_port)
{
    // As rxe0 (on eth0) and another NIC's address on one node: the port on
    // lo stands for the first, this machine's other address for the second.
    const uint32_t other = other_local_address();
    if (other == 0) {
        GTEST_SKIP() << "this machine has no IPv4 address besides loopback";
    }
    verbs::ipv4_reach r;
    ASSERT_TRUE(r.init(gid(ip("127.0.0.1")).raw));
    EXPECT_FALSE(r.reachable(gid(other).raw));
    EXPECT_FALSE(r.reachable(gid(other).raw)); // learnt: the same answer
    EXPECT_TRUE(r.reachable(gid(ip("127.0.0.2")).raw)); // its own subnet
    verbs::ipv4_reach from_other;
    ASSERT_TRUE(from_other.init(gid(other).raw));
    EXPECT_TRUE(from_other.reachable(gid(other).raw));
}

TEST(roce_reach, a_port_without_an_ipv4_address_refuses_nothing)
{
    verbs::ipv4_reach r;
    EXPECT_FALSE(r.init(gid(ip("192.0.2.254")).raw)); // no interface has it
    EXPECT_TRUE(r.reachable(gid(ip("10.0.3.15")).raw));
}

} // namespace zv::test
