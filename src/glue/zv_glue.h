// SPDX-License-Identifier: BSD-3-Clause
// What the glue files share: range checks of config values, the transports'
// device query, and each transport's descriptor.
#ifndef ZV_GLUE_ZV_GLUE_H
#define ZV_GLUE_ZV_GLUE_H

#include "ucx/internal.h"

#include <cstddef>

namespace zv::glue {

/// One config value's check: 'bad' names a value outside 'allowed'.
struct range_check {
    const char *name;
    bool        bad;
    const char *allowed;
};

/// Log the first bad value ("UCX_X is out of range (allowed: ...)") and
/// return UCS_ERR_INVALID_PARAM; UCS_OK when all are good.
[[nodiscard]] ucs_status_t check_ranges(const range_check *checks, size_t count);

/// The active ports of a zv md, as transport devices (all zv transports).
ucs_status_t query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                           unsigned *num_devices_p);

/// RX_QUEUE_LEN of a connected transport, within the device's largest SRQ
/// (a smaller device gets a smaller queue, said at debug level; var names
/// the setting).
unsigned srq_queue_len(uct_md_h md, unsigned wanted, const char *var);

uct_tl_t *ud_tl();
uct_tl_t *uc_tl();

} // namespace zv::glue

#endif
