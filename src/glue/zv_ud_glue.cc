// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for ud_zv: its config table (UCX_UD_ZV_*) and transport descriptor.
#include "glue/zv_rd_glue.h"
#include "ud/ud_iface.h"

#include <ucs/config/parser.h>

#include <cstddef>

namespace {

struct zv_ud_iface_config {
    uct_iface_config_t     super;
    zv::glue::queue_config queue;
    zv::glue::rel_config   rel;
};

ucs_config_field_t zv_ud_iface_config_table[] = {
    {"", "", nullptr, offsetof(zv_ud_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    // (Embedded without a prefix of their own, so that UCT's
    // uct_config_modify() takes the names as ucx_info prints them after
    // UCX_UD_ZV_: "RX_QUEUE_LEN", "WINDOW".)
    {"", "", nullptr, offsetof(zv_ud_iface_config, queue),
     UCS_CONFIG_TYPE_TABLE(zv::glue::queue_config_table)},
    {"", "", nullptr, offsetof(zv_ud_iface_config, rel),
     UCS_CONFIG_TYPE_TABLE(zv::glue::rel_config_table)},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

ucs_status_t zv_ud_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_ud_iface_config *>(uct_config);
    zv::rd::rd_settings s;
    ucs_status_t status = zv::glue::rel_settings(config->queue, config->rel, "UCX_UD_ZV_",
                                                 "UD_ZV_", &s);
    if (status != UCS_OK) {
        return status;
    }
    return zv::ud::iface_open(md, worker, params, uct_config, s, iface_p);
}

uct_tl_t ud_zv_tl = {
    /* name          */ "ud_zv",
    /* query_devices */ zv::glue::query_devices,
    /* iface_open    */ zv_ud_iface_open,
    /* config        */ {"ud_zv transport", "UD_ZV_", zv_ud_iface_config_table,
                         sizeof(zv_ud_iface_config), {nullptr, nullptr}},
    /* list          */ {nullptr, nullptr},
};

} // namespace

namespace zv::glue {

uct_tl_t *ud_tl() { return &ud_zv_tl; }

} // namespace zv::glue
