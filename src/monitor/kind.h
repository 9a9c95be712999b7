// SPDX-License-Identifier: BSD-3-Clause
// What a memory monitor is asked to be: its kind, the uffd registration mode
// and the size of its event queue (the monitor layer's settings; the cache's
// configuration, rcache/config.h, carries them).
#ifndef ZV_MONITOR_KIND_H_
#define ZV_MONITOR_KIND_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>

namespace zv::monitor {

// Which source tells the cache that memory behind a registration changed.
enum class monitor_kind : uint8_t {
    none, // no cache: every registration is real and released at deregistration
    uffd, // kernel notifier: userfaultfd UNMAP/REMOVE/REMAP events
    ucm,  // interception: UCM's UCM_EVENT_VM_UNMAPPED
    automatic, // uffd where the kernel allows it, else ucm, else none
};

// How the uffd monitor registers ranges. Only "wp" is for production; "missing"
// exists for kernels older than 5.7 and so that tests exercise fault resolution.
enum class uffd_mode : uint8_t {
    automatic, // wp when the kernel has UFFD_FEATURE_PAGEFAULT_FLAG_WP, else missing
    wp,        // UFFDIO_REGISTER_MODE_WP without ever write-protecting: no faults
    missing,   // UFFDIO_REGISTER_MODE_MISSING: the monitor resolves first touches
};

struct settings {
    monitor_kind kind        = monitor_kind::automatic;
    uffd_mode    uffd        = uffd_mode::automatic;
    size_t       event_queue = 4096; // entries, rounded up to a power of two
};

// Names accepted by parse_monitor_kind(), in the order of the enum, for the
// glue's UCS_CONFIG_TYPE_ENUM table (NULL-terminated).
extern const char *const k_monitor_kind_names[];
extern const char *const k_uffd_mode_names[];

// Parses "auto", "uffd", "ucm" or "none" (case-insensitive). Unknown values log
// an error naming the accepted ones and return UCS_ERR_INVALID_PARAM.
[[nodiscard]] ucs_status_t parse_monitor_kind(const char *value, monitor_kind *out);
[[nodiscard]] ucs_status_t parse_uffd_mode(const char *value, uffd_mode *out);

const char *monitor_kind_name(monitor_kind kind);

} // namespace zv::monitor

#endif
