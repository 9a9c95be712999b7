// SPDX-License-Identifier: BSD-3-Clause
// On-demand paging decision (see odp.h).
#include "rcache/odp.h"

#include <infiniband/verbs.h>

#include <initializer_list>

namespace zv::rcache {

namespace {

constexpr unsigned k_known_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

bool has(uint32_t caps, uint32_t need) { return (caps & need) == need; }

} // namespace

odp_decision decide_odp(const odp_caps &caps, unsigned access, unsigned transports)
{
    odp_decision d;
    if (!(caps.general_caps & IBV_ODP_SUPPORT) || (access & ~k_known_access) ||
        (transports == 0)) {
        return d;
    }

    uint32_t rc = IBV_ODP_SUPPORT_SEND, uc = IBV_ODP_SUPPORT_SEND, ud = IBV_ODP_SUPPORT_SEND;
    if (access & IBV_ACCESS_LOCAL_WRITE) {
        rc |= IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV | IBV_ODP_SUPPORT_READ;
        uc |= IBV_ODP_SUPPORT_RECV;
        ud |= IBV_ODP_SUPPORT_RECV;
    }
    if (access & IBV_ACCESS_REMOTE_WRITE) {
        rc |= IBV_ODP_SUPPORT_WRITE;
        uc |= IBV_ODP_SUPPORT_WRITE;
    }
    if (access & IBV_ACCESS_REMOTE_READ) {
        rc |= IBV_ODP_SUPPORT_READ;
    }
    if (access & IBV_ACCESS_REMOTE_ATOMIC) {
        rc |= IBV_ODP_SUPPORT_ATOMIC;
    }

    if (((transports & k_odp_rc) && !has(caps.rc_caps, rc)) ||
        ((transports & k_odp_uc) && !has(caps.uc_caps, uc)) ||
        ((transports & k_odp_ud) && !has(caps.ud_caps, ud))) {
        return d;
    }
    d.use      = true;
    d.implicit = (caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) != 0;
    return d;
}

unsigned odp_access_mask(const odp_caps &caps, unsigned transports)
{
    // Requirements only grow with access bits, so the set of allowed
    // requests is "any subset of the bits allowed one at a time".
    if (!decide_odp(caps, 0, transports).use) {
        return 0;
    }
    unsigned mask = 0;
    for (unsigned bit : {IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ,
                         IBV_ACCESS_REMOTE_ATOMIC}) {
        if (decide_odp(caps, bit, transports).use) {
            mask |= bit;
        }
    }
    return mask;
}

} // namespace zv::rcache
