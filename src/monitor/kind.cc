// SPDX-License-Identifier: BSD-3-Clause
// Monitor settings: parsing of the monitor kind and the uffd mode.
#include "monitor/kind.h"

#include "util/log.h"
#include "util/text.h"

#include <strings.h>

namespace zv::monitor {

const char *const k_monitor_kind_names[] = {ZV_RCACHE_MONITORS(ZV_TEXT_NAME, ZV_TEXT_COMMA),
                                            nullptr};
const char *const k_uffd_mode_names[] = {ZV_RCACHE_UFFD_MODES(ZV_TEXT_NAME, ZV_TEXT_COMMA),
                                         nullptr};

ucs_status_t parse_monitor_kind(const char *value, monitor_kind *out)
{
    static const monitor_kind kinds[] = {monitor_kind::none, monitor_kind::uffd,
                                         monitor_kind::ucm, monitor_kind::automatic};
    for (size_t i = 0; (value != nullptr) && (k_monitor_kind_names[i] != nullptr); ++i) {
        if (strcasecmp(value, k_monitor_kind_names[i]) == 0) {
            *out = kinds[i];
            return UCS_OK;
        }
    }
    zv_log_error("UCX_ZV_RCACHE_MONITOR: unknown value '%s' (expected "
                 ZV_RCACHE_MONITOR_SYNTAX ")",
                 (value != nullptr) ? value : "(null)");
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t parse_uffd_mode(const char *value, uffd_mode *out)
{
    static const uffd_mode modes[] = {uffd_mode::automatic, uffd_mode::wp, uffd_mode::missing};
    for (size_t i = 0; (value != nullptr) && (k_uffd_mode_names[i] != nullptr); ++i) {
        if (strcasecmp(value, k_uffd_mode_names[i]) == 0) {
            *out = modes[i];
            return UCS_OK;
        }
    }
    zv_log_error("UCX_ZV_RCACHE_UFFD_MODE: unknown value '%s' (expected "
                 ZV_RCACHE_UFFD_MODE_SYNTAX ")",
                 (value != nullptr) ? value : "(null)");
    return UCS_ERR_INVALID_PARAM;
}

const char *monitor_kind_name(monitor_kind kind)
{
    const auto i = static_cast<size_t>(kind);
    return (i < sizeof(k_monitor_kind_names) / sizeof(k_monitor_kind_names[0]) - 1) ?
               k_monitor_kind_names[i] :
               "?";
}

} // namespace zv::monitor
