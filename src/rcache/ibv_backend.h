// SPDX-License-Identifier: BSD-3-Clause
// The real registration backend: ibv_reg_mr on one protection domain, with the ODP decision.
#ifndef ZV_RCACHE_IBV_BACKEND_H_
#define ZV_RCACHE_IBV_BACKEND_H_

#include "rcache/backend.h"
#include "rcache/odp.h"

#include <infiniband/verbs.h>

namespace zv::rcache {

// One per memory domain. The pd must outlive it. Thread-safe (libibverbs is).
class ibv_backend final : public backend {
public:
    // Queries the device's ODP caps and max_mr. use_odp: UCX_ZV_RCACHE_ODP.
    // transports: odp_transport bits the md's registrations serve.
    [[nodiscard]] static ucs_status_t create(struct ibv_pd *pd, bool use_odp,
                                             unsigned transports, ibv_backend **out);

    ucs_status_t reg(void *addr, size_t len, unsigned access, bool odp,
                     reg_handle *out) override;
    void         dereg(const reg_handle &handle) override;
    unsigned     odp_access() const override { return m_odp_access; }
    bool         odp_implicit() const override { return m_odp_implicit; }
    uint64_t     max_regions_hint() const override { return m_max_mr; }
    // Always. Whether libibverbs marks registrations MADV_DONTFORK cannot be
    // asked: on a kernel that copies pinned pages at fork,
    // ibv_is_fork_initialized() says IBV_FORK_UNNEEDED before and after
    // ibv_fork_init(), and rdma-core 44's ibv_fork_init() still turns the
    // marking on (measured in the Soft-RoCE VM: Linux 6.1, "copy-on-fork on";
    // a registered page is absent in the child). UCX's ib md calls it by
    // default; without it, deregistering idle regions costs only their
    // re-registration after a fork().
    bool         purge_before_fork() const override { return true; }

    static struct ibv_mr *mr(const reg_handle &h) { return static_cast<struct ibv_mr *>(h.obj); }

private:
    explicit ibv_backend(struct ibv_pd *pd) : m_pd(pd) {}

    struct ibv_pd *m_pd;
    unsigned       m_odp_access   = 0;
    bool           m_odp_implicit = false;
    uint64_t       m_max_mr       = 0;
};

} // namespace zv::rcache

#endif
