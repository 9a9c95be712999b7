// SPDX-License-Identifier: BSD-3-Clause
// Registration-cache settings: plain values, defaults and doc strings for the glue's UCX config table.
#ifndef ZV_RCACHE_CONFIG_H_
#define ZV_RCACHE_CONFIG_H_

#include "monitor/kind.h"

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

// Defaults and doc strings, for the glue's ucs_config_field_t table.
inline constexpr const char *k_max_size_default = "auto";
inline constexpr const char *k_max_size_doc =
    "Largest total size of registered memory the cache keeps for reuse. Idle "
    "regions are evicted least-recently-used first beyond it. \"auto\" is "
    "physical memory / (2 x online CPUs), and at most 3/4 of RLIMIT_MEMLOCK when "
    "that is finite: with one process per core, idle cached registrations of all "
    "of them together pin at most half of the node's memory.";
inline constexpr const char *k_max_regions_default = "auto";
inline constexpr const char *k_max_regions_doc =
    "Largest number of registrations the cache keeps for reuse. \"auto\" is "
    "min(16384, the device's max_mr / online CPUs), so one process per core "
    "cannot exhaust the HCA's memory-region resources.";
inline constexpr const char *k_monitor_default = "auto";
inline constexpr const char *k_monitor_doc =
    "Source of memory-change events for the registration cache, chosen once per "
    "process, by the first zv memory domain opened (a later one that asks for "
    "another is warned and shares it):\n"
    " uffd - the kernel notifier (userfaultfd UNMAP/REMOVE/REMAP events); sees "
    "every change to the page tables, whoever makes it; private anonymous memory "
    "only, other memory is registered for each use.\n"
    " ucm  - the intercept (UCM memory events): sees only calls that go through "
    "its hooks.\n"
    " none - no cache: every registration is real and released at deregistration.\n"
    " auto - uffd where the kernel allows it, else ucm, else none.";
inline constexpr const char *k_event_queue_default = "4096";
inline constexpr const char *k_event_queue_doc =
    "Capacity of the invalidation queue between the monitor and the caches. A "
    "cache that falls further behind drops all its idle regions instead of "
    "reading the lost events.";
inline constexpr const char *k_uffd_mode_default = "auto";
inline constexpr const char *k_uffd_mode_doc =
    "How the uffd monitor registers ranges: wp (no page faults reach the "
    "monitor), missing (first touches are resolved with zero pages; kernels "
    "before 5.7), auto (wp when available).";
inline constexpr const char *k_odp_default = "try";
inline constexpr const char *k_odp_doc =
    "Register with on-demand paging, bypassing the cache, where the device "
    "supports it for the requested access.";

// Limits after resolving "auto". device_max_mr == 0 means unknown.
struct limits {
    size_t max_size;
    size_t max_regions;
};
limits resolve_limits(const config &cfg, uint64_t device_max_mr);

} // namespace zv::rcache

#endif
