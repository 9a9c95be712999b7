// SPDX-License-Identifier: BSD-3-Clause
// What the glue of ud_zv and uc_zv shares: the reliability settings
// (UCX_UD_ZV_WINDOW, UCX_UC_ZV_RTO, ...), one table in each transport's.
#ifndef ZV_GLUE_ZV_RD_GLUE_H
#define ZV_GLUE_ZV_RD_GLUE_H

#include "glue/zv_glue.h"
#include "rd/rd_iface.h"

namespace zv::glue {

/// The software reliability and send moderation, embedded in ud_zv's and
/// uc_zv's tables without a prefix of its own.
struct rel_config {
    unsigned window;
    double   rto;
    double   rto_max;
    double   timeout;
    double   ack_delay;
    unsigned tx_moderation;
};
extern ucs_config_field_t rel_config_table[];

/// The queue and reliability settings with their range checks, and the
/// testing-only fault injection from the environment; prefix names the
/// variables ("UCX_UD_ZV_"), tl_prefix is the same without UCX_.
[[nodiscard]] ucs_status_t rel_settings(const queue_config &q, const rel_config &c,
                                        const char *prefix, const char *tl_prefix,
                                        rd::rd_settings *s);

} // namespace zv::glue

#endif
