// SPDX-License-Identifier: BSD-3-Clause
// Registration-cache settings: plain values, defaults and doc strings for the glue's UCX config table.
#ifndef ZV_RCACHE_CONFIG_H_
#define ZV_RCACHE_CONFIG_H_

#include "monitor/kind.h"
#include "util/text.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>

namespace zv::rcache {

// The monitor's settings are part of the cache's configuration.
using monitor::monitor_kind;
using monitor::uffd_mode;
using monitor::k_monitor_kind_names;
using monitor::k_uffd_mode_names;
using monitor::parse_monitor_kind;
using monitor::parse_uffd_mode;
using monitor::monitor_kind_name;

// The encodings of UCX's "auto"/"inf" for memunits (size_t) and ulunits
// (unsigned long), same values as UCS_MEMUNITS_AUTO/INF in <ucs/sys/string.h>,
// so the glue can copy parsed values straight into this struct.
inline constexpr size_t k_units_inf  = static_cast<size_t>(-1);
inline constexpr size_t k_units_auto = static_cast<size_t>(-2);

struct config {
    // UCX_ZV_RCACHE_MAX_SIZE (memunits)
    size_t       max_size    = k_units_auto;
    // UCX_ZV_RCACHE_MAX_REGIONS (ulunits)
    size_t       max_regions = k_units_auto;
    // UCX_ZV_RCACHE_MONITOR (enum: auto, uffd, ucm, none)
    monitor_kind monitor     = monitor_kind::automatic;
    // UCX_ZV_RCACHE_EVENT_QUEUE (unsigned, rounded up to a power of two)
    size_t       event_queue = 4096;
    // UCX_ZV_RCACHE_UFFD_MODE (enum: auto, wp, missing); advanced
    uffd_mode    uffd        = uffd_mode::automatic;
    // UCX_ZV_RCACHE_ODP (ternary as bool: try on-demand paging where the device allows)
    bool         odp         = true;

    monitor::settings monitor_settings() const { return {monitor, uffd, event_queue}; }
};

// Defaults and doc strings, for the glue's ucs_config_field_t table (the
// texts are rcache/text.h's, which the Open MPI component shares).
inline constexpr const char *k_max_size_default    = ZV_RCACHE_MAX_SIZE_DEFAULT;
inline constexpr const char *k_max_size_doc        = ZV_RCACHE_MAX_SIZE_DOC;
inline constexpr const char *k_max_regions_default = ZV_RCACHE_MAX_REGIONS_DEFAULT;
inline constexpr const char *k_max_regions_doc     = ZV_RCACHE_MAX_REGIONS_DOC;
inline constexpr const char *k_monitor_default     = ZV_RCACHE_MONITOR_DEFAULT;
inline constexpr const char *k_monitor_doc         = ZV_RCACHE_MONITOR_DOC("\n ");
inline constexpr const char *k_event_queue_default = ZV_RCACHE_EVENT_QUEUE_DEFAULT;
inline constexpr const char *k_event_queue_doc     = ZV_RCACHE_EVENT_QUEUE_DOC;
inline constexpr const char *k_uffd_mode_default   = ZV_RCACHE_UFFD_MODE_DEFAULT;
inline constexpr const char *k_uffd_mode_doc       = ZV_RCACHE_UFFD_MODE_DOC;
inline constexpr const char *k_odp_default         = ZV_RCACHE_ODP_DEFAULT;
inline constexpr const char *k_odp_doc             = ZV_RCACHE_ODP_DOC;

// Limits after resolving "auto". device_max_mr == 0 means unknown.
struct limits {
    size_t max_size;
    size_t max_regions;
};
limits resolve_limits(const config &cfg, uint64_t device_max_mr);

} // namespace zv::rcache

#endif
