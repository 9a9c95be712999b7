// SPDX-License-Identifier: BSD-3-Clause
// Which RoCE peers a port can reach: on a node with one network per rail
// (rxe0 on 10.0.2.0/24, rxe1 on 10.0.3.0/24), a GID of the other rail is
// not reachable from this one, and a connection to it fails in
// ibv_create_ah() after the kernel's neighbour timeout. UCP pairs rails by
// reachability and cost, so the answer must be right.
#ifndef ZV_VERBS_ROUTE_H
#define ZV_VERBS_ROUTE_H

#include <cstdint>
#include <unordered_map>

namespace zv::verbs {

/// The IPv4 address in an IPv4-mapped GID (::ffff:a.b.c.d, as RoCE v2 and
/// RoCE v1 over IPv4 use), in network order; false for any other GID.
bool gid_ipv4(const uint8_t gid[16], uint32_t *addr);

/// How the kernel routes a packet from 'src' to 'dst' (network order):
/// the route's type (RTN_UNICAST, RTN_LOCAL, ...) and output interface.
/// False when it cannot say (no route: ENETUNREACH; netlink refused).
bool ipv4_route(uint32_t src, uint32_t dst, unsigned *type, int *oif);

/// Reachability of IPv4 RoCE peers from one port, learnt once per peer
/// address. A peer in the port's subnet is reachable (the same network); one
/// outside it is reachable when the kernel routes it out of the port's
/// network interface, through a gateway (routed RoCE v2), and not
/// otherwise (another rail's network, or an address of another local
/// interface). Not thread safe (one per interface).
class ipv4_reach {
public:
    /// For the port whose GID holds 'gid': finds the interface that has its
    /// address, and that address's subnet. False (reachable() then says yes
    /// to everything, as without this check) for a non-IPv4 GID or an
    /// address no interface has.
    bool init(const uint8_t gid[16]);

    /// Whether a peer whose GID is 'gid' is reachable from this port.
    bool reachable(const uint8_t gid[16]);

    /// The decision, from what the kernel said ('routed': ipv4_route()'s
    /// result); what reachable() applies.
    static bool decide(uint32_t local, uint32_t mask, int ifindex, uint32_t dst, bool routed,
                       unsigned type, int oif);

private:
    bool                               m_known = false;
    uint32_t                           m_addr = 0, m_mask = 0; ///< network order
    int                                m_ifindex = 0;
    std::unordered_map<uint32_t, bool> m_peers;
};

} // namespace zv::verbs

#endif
