// SPDX-License-Identifier: BSD-3-Clause
// On-demand paging decision: a pure function of the device's ODP caps and the access needed.
#ifndef ZV_RCACHE_ODP_H_
#define ZV_RCACHE_ODP_H_

#include <cstdint>

namespace zv::rcache {

// The subset of struct ibv_odp_caps the decision needs (same bit meanings:
// IBV_ODP_SUPPORT*, IBV_ODP_SUPPORT_SEND/RECV/WRITE/READ/ATOMIC/SRQ_RECV).
struct odp_caps {
    uint64_t general_caps = 0;
    uint32_t rc_caps      = 0;
    uint32_t uc_caps      = 0;
    uint32_t ud_caps      = 0;
};

// Transports a registration may be used on (the md serves all three).
enum odp_transport : unsigned {
    k_odp_rc = 1u << 0,
    k_odp_uc = 1u << 1,
    k_odp_ud = 1u << 2,
};

struct odp_decision {
    bool use      = false; // register with IBV_ACCESS_ON_DEMAND, bypass the cache
    bool implicit = false; // one implicit MR (addr NULL, length SIZE_MAX) covers everything
};

// An MR may be used on every transport in `transports` for every operation
// its access flags (IBV_ACCESS_*) allow; ODP is used only if the device pages
// on demand for all of them:
//   always                 SEND on every transport (local read for sends)
//   IBV_ACCESS_LOCAL_WRITE RECV (SRQ_RECV too on rc), and READ on rc (the
//                          local side of an RDMA read writes into the MR)
//   IBV_ACCESS_REMOTE_WRITE WRITE on rc and uc (ud has no RDMA)
//   IBV_ACCESS_REMOTE_READ READ on rc
//   IBV_ACCESS_REMOTE_ATOMIC ATOMIC on rc
// Any other access bit (MW binding, relaxed ordering, ...) is not decided
// here: ODP is refused for it.
odp_decision decide_odp(const odp_caps &caps, unsigned access, unsigned transports);

// The access bits (among the five above) for which decide_odp() says yes, for
// the cache's one-AND check on every get().
unsigned odp_access_mask(const odp_caps &caps, unsigned transports);

} // namespace zv::rcache

#endif
