// SPDX-License-Identifier: BSD-3-Clause
// The zv memory domain: one opened verbs device, memory registration, rkeys.
#ifndef ZV_MD_ZV_MD_H
#define ZV_MD_ZV_MD_H

#include "rcache/cache.h"
#include "rcache/ibv_backend.h"
#include "verbs/async.h"
#include "verbs/device.h"
#include "verbs/locality.h"

#include "ucx/internal.h"

#include <atomic>
#include <cstddef>

namespace zv::md {

/// Memory-domain settings, filled by the glue from UCX_ZV_* variables.
struct md_settings {
    int            gid_index = -1;  ///< -1: automatic
    double         reg_cost_overhead; ///< seconds per registration (cache miss)
    double         reg_cost_growth;   ///< seconds per byte registered
    rcache::config rcache;          ///< UCX_ZV_RCACHE_*
};

/// A registration handed to UCT as uct_mem_h: a region of the md's cache
/// (which, with the cache off, is a registration for this one use).
using memh = rcache::region;

inline uint32_t memh_lkey(const void *m) { return static_cast<const memh *>(m)->lkey(); }

/// Packed remote key: what a peer needs to access our memory.
struct packed_rkey {
    uint32_t rkey;
};

/// The zv md. 'super' must stay first: UCT casts uct_md_h to it.
struct zv_md {
    uct_md_t             super;
    verbs::device        dev;
    /// Where the device sits in the node (hwloc), found once at open.
    verbs::locality      locality;
    ucs_sys_device_t     sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    md_settings          settings;
    rcache::ibv_backend *backend = nullptr;
    rcache::cache       *cache   = nullptr;
    /// mem_reg calls that failed (after the cache's evict-and-retry): the
    /// caller (UCP) then falls back to a copy path.
    std::atomic<uint64_t> reg_failures{0};
    /// The device's asynchronous events, read in UCX's async thread and
    /// handed to the interfaces opened on this md (iface/zv_iface.cc).
    verbs::async_dispatcher events;
    bool                 events_registered = false;
};

/// Component-level entry points (installed in the component by the glue).
[[nodiscard]] ucs_status_t query_md_resources(uct_component_t *component,
                                              uct_md_resource_desc_t **resources_p,
                                              unsigned *num_resources_p);
[[nodiscard]] ucs_status_t open(uct_component_t *component, const char *md_name,
                                const md_settings &settings, uct_md_h *md_p);
[[nodiscard]] ucs_status_t rkey_unpack(uct_component_t *component,
                                       const void *rkey_buffer,
                                       uct_rkey_t *rkey_p, void **handle_p);
[[nodiscard]] ucs_status_t rkey_release(uct_component_t *component,
                                        uct_rkey_t rkey, void *handle);

/// One UCT device per active port ("rxe0:1"), type NET. A connected
/// transport (srq_tl: its name; null for ud_zv) gets none on a device
/// without a usable shared receive queue (debug log says why).
[[nodiscard]] ucs_status_t query_port_devices(uct_md_h md,
                                              uct_tl_device_resource_t **devices_p,
                                              unsigned *num_devices_p,
                                              const char *srq_tl = nullptr);

/// Parse "dev:port" against this md; returns the port or nullptr.
const verbs::port_info *find_port(const zv_md *md, const char *dev_name);

inline zv_md *from_uct(uct_md_h md) { return reinterpret_cast<zv_md *>(md); }

} // namespace zv::md

#endif
