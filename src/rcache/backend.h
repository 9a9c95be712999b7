// SPDX-License-Identifier: BSD-3-Clause
// The registration backend interface: what the cache calls on a miss to register memory.
#ifndef ZV_RCACHE_BACKEND_H_
#define ZV_RCACHE_BACKEND_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>

namespace zv::rcache {

// What a registration gives the transports. obj is the backend's own handle
// (struct ibv_mr * for the verbs backend).
struct reg_handle {
    void    *obj  = nullptr;
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

// Called only on the cache's slow paths (miss, release of a region that is
// no longer cached), never on a hit, so a virtual call costs nothing there.
// Implementations must be thread-safe: the cache calls reg() under its own
// lock but dereg() also from whichever thread drops the last reference.
class backend {
public:
    virtual ~backend() = default;

    // Registers [addr, addr + len) (page-aligned by the cache) for access
    // (IBV_ACCESS_* bits, passed through). odp: register with on-demand
    // paging; only requested for access bits within odp_access().
    // Must fail without side effects (no log above debug) on memory that is
    // not mapped: the cache retries smaller ranges.
    [[nodiscard]] virtual ucs_status_t reg(void *addr, size_t len, unsigned access, bool odp,
                                           reg_handle *out) = 0;
    virtual void dereg(const reg_handle &handle) = 0;

    // Access bits for which the device offers on-demand paging and the
    // backend wants it used (0: never). Asked once, at cache creation.
    virtual unsigned odp_access() const { return 0; }
    // True when one implicit on-demand registration covers all memory
    // (reg() is then called once with addr = nullptr, len = SIZE_MAX).
    virtual bool odp_implicit() const { return false; }
    // The device's MR limit, for the "auto" max_regions (0: unknown).
    virtual uint64_t max_regions_hint() const { return 0; }
    // True when a registration that outlives a fork() can harm: its pages
    // are absent in the child (MADV_DONTFORK, libibverbs' fork support), or
    // shared copy-on-write with it (a kernel that does not copy pinned
    // pages at fork), so the parent's would move away from the
    // registration. The cache then deregisters its idle regions before
    // every fork(). Asked in the fork handler.
    virtual bool purge_before_fork() const { return true; }
};

} // namespace zv::rcache

#endif
