// SPDX-License-Identifier: BSD-3-Clause
// RoCE reachability from the kernel's routing (see route.h).
#include "verbs/route.h"

#include "util/nothrow.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace zv::verbs {

namespace {

void add_u32_attr(nlmsghdr *h, unsigned short type, uint32_t value)
{
    auto *a     = reinterpret_cast<rtattr *>(reinterpret_cast<char *>(h) +
                                         NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type;
    a->rta_len  = RTA_LENGTH(sizeof(value));
    std::memcpy(RTA_DATA(a), &value, sizeof(value));
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

bool same_subnet(uint32_t a, uint32_t b, uint32_t mask)
{
    return (a & mask) == (b & mask);
}

const char *ip_str(uint32_t addr, char *buf)
{
    return inet_ntop(AF_INET, &addr, buf, INET_ADDRSTRLEN);
}

} // namespace

bool gid_ipv4(const uint8_t gid[16], uint32_t *addr)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(gid, prefix, sizeof(prefix)) != 0) {
        return false;
    }
    std::memcpy(addr, gid + 12, sizeof(*addr));
    return true;
}

bool ipv4_route(uint32_t src, uint32_t dst, unsigned *type, int *oif)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        return false;
    }
    timeval tv = {1, 0}; // the kernel answers at once; never wait forever
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

    struct {
        nlmsghdr h;
        rtmsg    r;
        char     attrs[64];
    } req = {};
    req.h.nlmsg_len   = NLMSG_LENGTH(sizeof(rtmsg));
    req.h.nlmsg_type  = RTM_GETROUTE;
    req.h.nlmsg_flags = NLM_F_REQUEST;
    req.h.nlmsg_seq   = 1;
    req.r.rtm_family  = AF_INET;
    req.r.rtm_dst_len = 32;
    req.r.rtm_src_len = 32;
    add_u32_attr(&req.h, RTA_DST, dst);
    add_u32_attr(&req.h, RTA_SRC, src);

    sockaddr_nl kernel = {};
    kernel.nl_family   = AF_NETLINK;
    bool found         = false;
    alignas(nlmsghdr) char buf[4096];
    if (sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr *>(&kernel),
               sizeof(kernel)) == static_cast<ssize_t>(req.h.nlmsg_len)) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        auto *h   = reinterpret_cast<nlmsghdr *>(buf);
        if ((n > 0) && NLMSG_OK(h, static_cast<unsigned>(n)) && (h->nlmsg_type == RTM_NEWROUTE)) {
            auto *r  = static_cast<rtmsg *>(NLMSG_DATA(h));
            int  len = static_cast<int>(RTM_PAYLOAD(h));
            *type    = r->rtm_type;
            *oif     = 0;
            for (auto *a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if ((a->rta_type == RTA_OIF) && (RTA_PAYLOAD(a) >= sizeof(int))) {
                    std::memcpy(oif, RTA_DATA(a), sizeof(int));
                }
            }
            found = true;
        }
    }
    close(fd);
    return found;
}

bool ipv4_reach::init(const uint8_t gid[16])
{
    m_known = false;
    m_peers.clear();
    if (!gid_ipv4(gid, &m_addr)) {
        return false;
    }
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) {
        return false;
    }
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if ((i->ifa_addr == nullptr) || (i->ifa_addr->sa_family != AF_INET) ||
            (i->ifa_netmask == nullptr) ||
            (reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr != m_addr)) {
            continue;
        }
        m_mask    = reinterpret_cast<sockaddr_in *>(i->ifa_netmask)->sin_addr.s_addr;
        m_ifindex = static_cast<int>(if_nametoindex(i->ifa_name));
        m_known   = (m_ifindex > 0);
        break;
    }
    freeifaddrs(list);
    return m_known;
}

bool ipv4_reach::decide(uint32_t local, uint32_t mask, int ifindex, uint32_t dst, bool routed,
                        unsigned type, int oif)
{
    if (same_subnet(dst, local, mask)) {
        return true; // the port's own network
    }
    if (!routed) {
        return true; // the kernel cannot say: do not refuse what may work
    }
    return (type == RTN_UNICAST) && (oif == ifindex);
}

bool ipv4_reach::reachable(const uint8_t gid[16])
{
    uint32_t dst;
    if (!m_known || !gid_ipv4(gid, &dst)) {
        return true;
    }
    if (same_subnet(dst, m_addr, m_mask)) {
        return true; // no need to ask the kernel
    }
    auto it = m_peers.find(dst);
    if (it != m_peers.end()) {
        return it->second;
    }
    unsigned type  = 0;
    int      oif   = 0;
    bool     route = ipv4_route(m_addr, dst, &type, &oif);
    bool     yes   = decide(m_addr, m_mask, m_ifindex, dst, route, type, oif);
    char     a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN], dev[IF_NAMESIZE] = "?";
    char     out[IF_NAMESIZE + 16];
    (void)if_indextoname(static_cast<unsigned>(oif), dev);
    std::snprintf(out, sizeof(out), "routed out of %s", dev);
    ucs_debug("RoCE peer %s from %s: %s (%s)", ip_str(dst, a), ip_str(m_addr, b),
              yes ? "reachable" : "not reachable",
              !route ? "no route known" :
              (type == RTN_LOCAL) ? "an address of another local interface" :
              (oif == m_ifindex) ? "routed out of this interface" : out);
    // Remembered only to ask the kernel once: out of memory, it asks again.
    (void)util::try_alloc([&] { m_peers.emplace(dst, yes); });
    return yes;
}

} // namespace zv::verbs
