// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for rc_zv: its config table (UCX_RC_ZV_*) and transport descriptor.
#include "glue/zv_glue.h"
#include "md/zv_md.h"
#include "rc/rc_iface.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>

#include <algorithm>
#include <cstddef>

namespace {

struct zv_rc_iface_config {
    uct_iface_config_t      super;
    zv::glue::queue_config  queue;
    unsigned                tx_cq_len;
    unsigned                tx_moderation;
    size_t                  seg_size;
    double                  conn_timeout;
    double                  timeout;
    unsigned                retry_count;
    unsigned                max_rd_atomic;
};

ucs_config_field_t zv_rc_iface_config_table[] = {
    // MAX_NUM_EPS=auto: what a process can afford (src/iface/scale.h and
    // contrib/doc/design.md, "Scale"), so that UCP moves to ud_zv beyond it.
    {"", "MAX_NUM_EPS=auto", nullptr, offsetof(zv_rc_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    // The queue settings every zv transport has, with rc_zv's defaults.
    {"", "RX_QUEUE_LEN=2048", nullptr, offsetof(zv_rc_iface_config, queue),
     UCS_CONFIG_TYPE_TABLE(zv::glue::queue_config_table)},

    {"TX_CQ_LEN", "4096",
     "Send work requests that may be outstanding on the whole interface (the\n"
     "size of its send completion queue). 1/16 of it is kept for the signaled\n"
     "work requests that report unsignaled ones when it runs full.",
     offsetof(zv_rc_iface_config, tx_cq_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MODERATION", "32",
     "Ask the device for a send completion only once in this many sends (and\n"
     "whenever a completion is needed); 1 signals every send.",
     offsetof(zv_rc_iface_config, tx_moderation), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Size of receive and bounce buffers: the largest active message.",
     offsetof(zv_rc_iface_config, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"CONN_TIMEOUT", "30s",
     "How long an endpoint tries to reach the peer's interface before it fails\n"
     "with an endpoint error. Also how long a closing connection waits for the\n"
     "peer's answer, and how often a queue pair no endpoint here uses is probed:\n"
     "one whose peer is gone is destroyed within about three times this.",
     offsetof(zv_rc_iface_config, conn_timeout), UCS_CONFIG_TYPE_TIME},

    {"TIMEOUT", "1s",
     "Transport retry timeout of the RC queue pairs (rounded to the device's\n"
     "4.096us * 2^n steps). With RETRY_COUNT it bounds how long a dead peer\n"
     "goes unnoticed.",
     offsetof(zv_rc_iface_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "6",
     "Transport retries before a send fails with an endpoint error (0..6; 7\n"
     "means retry forever on some devices and is refused).",
     offsetof(zv_rc_iface_config, retry_count), UCS_CONFIG_TYPE_UINT},

    {"MAX_RD_ATOMIC", "4",
     "RDMA READ and atomic operations in flight per queue pair, each way: what\n"
     "an endpoint issues at a time (a rendezvous reads with them) and what it\n"
     "serves for its peer. Capped by the device's limits, and what an endpoint\n"
     "issues by what its peer serves (told when connecting). As UCX's\n"
     "UCX_RC_MAX_RD_ATOMIC (1..255).",
     offsetof(zv_rc_iface_config, max_rd_atomic), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

/// 4.096us * 2^n >= seconds, n in 1..31.
uint8_t ib_timeout_exponent(double seconds)
{
    uint8_t n = 1;
    while ((n < 31) && (4.096e-6 * static_cast<double>(1ull << n) < seconds)) {
        ++n;
    }
    return n;
}

ucs_status_t zv_rc_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_rc_iface_config *>(uct_config);
    zv::rc::rc_settings s;
    ucs_status_t status = zv::glue::queue_settings(config->queue, "UCX_RC_ZV_", {16, 4},
                                                   &s.common, &s.rx_batch, &s.max_inline);
    if (status != UCS_OK) {
        return status;
    }
    s.tx_cq_len           = config->tx_cq_len;
    s.tx_moderation       = config->tx_moderation;
    s.seg_size            = static_cast<unsigned>(config->seg_size);
    s.conn_timeout        = config->conn_timeout;
    s.timing.timeout      = ib_timeout_exponent(config->timeout);
    s.timing.retry_cnt    = static_cast<uint8_t>(config->retry_count);
    // (Range-checked below, capped to the device when the interface opens.)
    s.timing.max_rd_atomic      = static_cast<uint8_t>(config->max_rd_atomic);
    s.timing.max_dest_rd_atomic = s.timing.max_rd_atomic;

    const zv::glue::range_check checks[] = {
        {"UCX_RC_ZV_TX_CQ_LEN", (s.tx_cq_len < s.common.tx_queue_len) || (s.tx_cq_len > 262144), "TX_QUEUE_LEN..262144"},
        {"UCX_RC_ZV_TX_MODERATION", (s.tx_moderation == 0) || (s.tx_moderation > s.common.tx_queue_len / 2), "1..TX_QUEUE_LEN/2"},
        {"UCX_RC_ZV_SEG_SIZE", (config->seg_size < 256) || (config->seg_size > (1ul << 20)), "256..1m"},
        {"UCX_RC_ZV_CONN_TIMEOUT", !(config->conn_timeout > 0), "> 0"},
        {"UCX_RC_ZV_RETRY_COUNT", config->retry_count > 6, "0..6"},
        {"UCX_RC_ZV_MAX_RD_ATOMIC", (config->max_rd_atomic == 0) || (config->max_rd_atomic > 255), "1..255"},
        // 4.096us * 2^31 is the longest timeout a QP can hold.
        {"UCX_RC_ZV_TIMEOUT", !(config->timeout > 0) || (config->timeout > 8796), "> 0 and <= 8796s"},
    };
    status = zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
    if (status != UCS_OK) {
        return status;
    }
    s.common.rx_queue_len = zv::glue::srq_queue_len(md, s.common.rx_queue_len,
                                                    "UCX_RC_ZV_RX_QUEUE_LEN");
    s.rx_batch            = std::min(s.rx_batch, s.common.rx_queue_len);
    return zv::rc::iface_open(md, worker, params, uct_config, s, iface_p);
}
ucs_status_t zv_rc_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                unsigned *num_devices_p)
{
    return zv::md::query_port_devices(md, devices_p, num_devices_p, "rc_zv");
}

uct_tl_t rc_zv_tl = {
    /* name          */ "rc_zv",
    /* query_devices */ zv_rc_query_devices,
    /* iface_open    */ zv_rc_iface_open,
    /* config        */ {"rc_zv transport", "RC_ZV_", zv_rc_iface_config_table,
                         sizeof(zv_rc_iface_config), {nullptr, nullptr}},
    /* list          */ {nullptr, nullptr},
};
} // namespace

namespace zv::glue {

uct_tl_t *rc_tl() { return &rc_zv_tl; }

} // namespace zv::glue
