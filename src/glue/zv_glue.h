// SPDX-License-Identifier: BSD-3-Clause
// What the glue files share: range checks of config values, the transports'
// device query, the queue settings, and the descriptors the module registers.
#ifndef ZV_GLUE_ZV_GLUE_H
#define ZV_GLUE_ZV_GLUE_H

#include "iface/zv_iface.h"
#include "ucx/internal.h"

#include <cstddef>
#include <cstring>

namespace zv::glue {

/// A variable's full name, prefix and suffix, built without allocating
/// (interface open must not throw: design.md, "Out of memory").
struct var_name {
    char s[96];
    var_name(const char *prefix, const char *suffix)
    {
        const size_t n = strnlen(prefix, sizeof(s) - 1);
        const size_t m = strnlen(suffix, sizeof(s) - 1 - n);
        std::memcpy(s, prefix, n);
        std::memcpy(s + n, suffix, m);
        s[n + m] = '\0';
    }
    const char *c_str() const { return s; }
};

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

/// The queue settings of every transport (zv_queue_config.cc). A transport
/// includes queue_config_table in its own, with its defaults
/// ("RX_QUEUE_LEN=2048;...").
struct queue_config {
    unsigned      rx_queue_len;
    unsigned      rx_batch;
    unsigned      tx_queue_len;
    size_t        max_inline;
    unsigned      max_peer_conns;
    unsigned long tx_max_bufs;
};
extern ucs_config_field_t queue_config_table[];

/// Where a transport's ranges differ.
struct queue_limits {
    unsigned min_rx_queue_len;
    unsigned min_tx_queue_len;
};

/// Check c against the ranges ('prefix' names the variables in the error,
/// "UCX_RC_ZV_") and fill the settings.
[[nodiscard]] ucs_status_t queue_settings(const queue_config &c, const char *prefix,
                                          const queue_limits &limits,
                                          iface::iface_settings *common, unsigned *rx_batch,
                                          unsigned *max_inline);

/// The descriptors the module registers (zv_component.cc): the component
/// with the md (zv_md_glue.cc) and each transport's (zv_*_glue.cc).
uct_component_t *component();
uct_tl_t *rc_tl();
uct_tl_t *ud_tl();
uct_tl_t *uc_tl();

} // namespace zv::glue

#endif
