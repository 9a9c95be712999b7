// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for uc_zv: its config table (UCX_UC_ZV_*) and transport descriptor.
#include "glue/zv_rd_glue.h"
#include "md/zv_md.h"
#include "uc/uc_iface.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>

#include <algorithm>
#include <cstddef>

namespace {

struct zv_uc_iface_config {
    uct_iface_config_t super;
    zv::glue::queue_config queue;
    zv::glue::rel_config rel;
    size_t             seg_size;
    size_t             max_write;
    double             conn_timeout;
    ucs_on_off_auto_value_t one_packet;
};

ucs_config_field_t zv_uc_iface_config_table[] = {
    // MAX_NUM_EPS=auto, as for rc_zv (src/iface/scale.h).
    {"", "MAX_NUM_EPS=auto", nullptr, offsetof(zv_uc_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {"", "", nullptr, offsetof(zv_uc_iface_config, queue),
     UCS_CONFIG_TYPE_TABLE(zv::glue::queue_config_table)},
    {"", "", nullptr, offsetof(zv_uc_iface_config, rel),
     UCS_CONFIG_TYPE_TABLE(zv::glue::rel_config_table)},

    {"SEG_SIZE", "8k",
     "Size of receive and send buffers: the largest active message.",
     offsetof(zv_uc_iface_config, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"MAX_WRITE", "16k",
     "Largest RDMA write one put may carry. UC drops a whole message when any\n"
     "of its packets is lost, and the message is then written again: smaller\n"
     "writes lose less under loss; UCP splits larger transfers.",
     offsetof(zv_uc_iface_config, max_write), UCS_CONFIG_TYPE_MEMUNITS},

    {"CONN_TIMEOUT", "30s",
     "How long an endpoint tries to reach the peer's interface before it fails\n"
     "with an endpoint error. Also how long a closing connection waits for the\n"
     "peer's answer, and how often a queue pair no endpoint here uses is probed:\n"
     "one whose peer is gone is destroyed within about three times this.",
     offsetof(zv_uc_iface_config, conn_timeout), UCS_CONFIG_TYPE_TIME},

    {"ONE_PACKET", "auto",
     "Keep every active message and put within one packet of the port's MTU\n"
     "(on, off, auto). UC must start afresh at the next message when a lost\n"
     "packet cuts one short; Soft-RoCE (rxe) does not and then drops every later\n"
     "message on that queue pair, so auto means on for rxe and off elsewhere.",
     offsetof(zv_uc_iface_config, one_packet), UCS_CONFIG_TYPE_ON_OFF_AUTO},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

ucs_status_t zv_uc_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_uc_iface_config *>(uct_config);
    zv::uc::uc_settings s;
    ucs_status_t status = zv::glue::rel_settings(config->queue, config->rel, "UCX_UC_ZV_",
                                                 "UC_ZV_", &s.rd);
    if (status != UCS_OK) {
        return status;
    }
    s.seg_size     = static_cast<unsigned>(config->seg_size);
    s.max_write    = static_cast<unsigned>(config->max_write);
    s.conn_timeout = config->conn_timeout;
    s.one_packet   = config->one_packet;
    const zv::glue::range_check checks[] = {
        {"UCX_UC_ZV_SEG_SIZE", (config->seg_size < 256) || (config->seg_size > (1ul << 20)), "256..1m"},
        {"UCX_UC_ZV_MAX_WRITE", (config->max_write < 64) || (config->max_write > (1ul << 20)), "64..1m"},
        {"UCX_UC_ZV_CONN_TIMEOUT", !(config->conn_timeout > 0), "> 0"},
    };
    status = zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
    if (status != UCS_OK) {
        return status;
    }
    s.rd.common.rx_queue_len = zv::glue::srq_queue_len(md, s.rd.common.rx_queue_len,
                                                       "UCX_UC_ZV_RX_QUEUE_LEN");
    s.rd.rx_batch            = std::min(s.rd.rx_batch, s.rd.common.rx_queue_len);
    return zv::uc::iface_open(md, worker, params, uct_config, s, iface_p);
}

ucs_status_t zv_uc_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                unsigned *num_devices_p)
{
    return zv::md::query_port_devices(md, devices_p, num_devices_p, "uc_zv");
}

uct_tl_t uc_zv_tl = {
    /* name          */ "uc_zv",
    /* query_devices */ zv_uc_query_devices,
    /* iface_open    */ zv_uc_iface_open,
    /* config        */ {"uc_zv transport", "UC_ZV_", zv_uc_iface_config_table,
                         sizeof(zv_uc_iface_config), {nullptr, nullptr}},
    /* list          */ {nullptr, nullptr},
};

} // namespace

namespace zv::glue {

uct_tl_t *uc_tl() { return &uc_zv_tl; }

} // namespace zv::glue
