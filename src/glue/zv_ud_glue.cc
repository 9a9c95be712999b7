// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for ud_zv: its config table (UCX_UD_ZV_*) and transport descriptor.
#include "glue/zv_glue.h"
#include "ud/ud_iface.h"

#include <ucs/config/parser.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <cstddef>

namespace {

struct zv_ud_iface_config {
    uct_iface_config_t super;
    unsigned           rx_queue_len;
    unsigned           rx_batch;
    unsigned           tx_queue_len;
    size_t             max_inline;
    unsigned           window;
    double             rto;
    double             rto_max;
    double             timeout;
    double             ack_delay;
    double             fault_drop;
    double             fault_dup;
    double             fault_reorder;
    unsigned long      fault_seed;
};

ucs_config_field_t zv_ud_iface_config_table[] = {
    {"", "", nullptr, offsetof(zv_ud_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"RX_QUEUE_LEN", "4096",
     "Number of receive buffers posted to the interface's datagram queue pair,\n"
     "shared by all peers: it does not grow with the number of endpoints.",
     offsetof(zv_ud_iface_config, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"RX_BATCH", "64",
     "Receive buffers are re-posted once this many have been consumed, in one call.",
     offsetof(zv_ud_iface_config, rx_batch), UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Send work requests that may be outstanding on the interface (data,\n"
     "retransmissions and acknowledgements together).",
     offsetof(zv_ud_iface_config, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_INLINE", "128",
     "Largest packet copied into the work request itself (inline); the device\n"
     "may grant less.",
     offsetof(zv_ud_iface_config, max_inline), UCS_CONFIG_TYPE_MEMUNITS},

    {"WINDOW", "256",
     "Packets an endpoint may have sent and not yet had acknowledged. Each is\n"
     "kept (one MTU-sized buffer) until acknowledged, so this bounds the memory\n"
     "an endpoint holds for retransmission.",
     offsetof(zv_ud_iface_config, window), UCS_CONFIG_TYPE_UINT},

    {"RTO", "10ms",
     "First retransmission timeout: unacknowledged packets are sent again after\n"
     "this long without an acknowledgement; the timeout then doubles up to RTO_MAX.",
     offsetof(zv_ud_iface_config, rto), UCS_CONFIG_TYPE_TIME},

    {"RTO_MAX", "500ms",
     "Largest retransmission timeout (the cap of the doubling).",
     offsetof(zv_ud_iface_config, rto_max), UCS_CONFIG_TYPE_TIME},

    {"TIMEOUT", "30s",
     "A peer that acknowledges nothing for this long while packets are\n"
     "outstanding (the connection request included) is declared dead: its\n"
     "endpoint fails with an error. Detection takes between TIMEOUT and\n"
     "TIMEOUT + RTO_MAX.",
     offsetof(zv_ud_iface_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"ACK_DELAY", "100us",
     "Longest time a receiver waits for its own traffic to carry an\n"
     "acknowledgement before sending one on its own (one is also sent after\n"
     "WINDOW/4 packets).",
     offsetof(zv_ud_iface_config, ack_delay), UCS_CONFIG_TYPE_TIME},

    {"FAULT_DROP", "0",
     "Testing only: probability (0..1) that a received packet is dropped before\n"
     "the reliability layer sees it. 0 (the default) turns it off.",
     offsetof(zv_ud_iface_config, fault_drop), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_DUP", "0",
     "Testing only: probability (0..1) that a received packet is handled twice.",
     offsetof(zv_ud_iface_config, fault_dup), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_REORDER", "0",
     "Testing only: probability (0..1) that a received packet is held back and\n"
     "handled after the next one.",
     offsetof(zv_ud_iface_config, fault_reorder), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_SEED", "1",
     "Testing only: seed of the fault-injection random sequence (the same seed\n"
     "gives the same decisions for the same packets).",
     offsetof(zv_ud_iface_config, fault_seed), UCS_CONFIG_TYPE_ULONG},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

bool bad_rate(double p) { return !((p >= 0) && (p <= 1)); }

ucs_status_t zv_ud_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_ud_iface_config *>(uct_config);
    zv::ud::ud_settings s;
    s.common.rx_queue_len = config->rx_queue_len;
    s.common.tx_queue_len = config->tx_queue_len;
    s.rx_batch            = config->rx_batch;
    s.max_inline          = static_cast<unsigned>(config->max_inline);
    s.rel.window          = config->window;
    s.rel.rto_init        = ucs_time_from_sec(config->rto);
    s.rel.rto_max         = ucs_time_from_sec(config->rto_max);
    s.rel.peer_timeout    = ucs_time_from_sec(config->timeout);
    s.rel.ack_delay       = ucs_time_from_sec(config->ack_delay);
    s.rel.ack_every       = (config->window >= 4) ? config->window / 4 : 1;
    s.fault.drop          = config->fault_drop;
    s.fault.dup           = config->fault_dup;
    s.fault.reorder       = config->fault_reorder;
    s.fault.seed          = config->fault_seed;

    const zv::glue::range_check checks[] = {
        {"UCX_UD_ZV_RX_QUEUE_LEN", (s.common.rx_queue_len < 64) || (s.common.rx_queue_len > 65536), "64..65536"},
        {"UCX_UD_ZV_RX_BATCH", (s.rx_batch == 0) || (s.rx_batch > s.common.rx_queue_len), "1..RX_QUEUE_LEN"},
        {"UCX_UD_ZV_TX_QUEUE_LEN", (s.common.tx_queue_len < 16) || (s.common.tx_queue_len > 16384), "16..16384"},
        {"UCX_UD_ZV_TX_MAX_INLINE", config->max_inline > 1024, "0..1024"},
        {"UCX_UD_ZV_WINDOW", (s.rel.window < 2) || (s.rel.window > zv::rel::max_window), "2..16384"},
        {"UCX_UD_ZV_RTO", !(config->rto > 0), "> 0"},
        {"UCX_UD_ZV_RTO_MAX", !(config->rto_max >= config->rto), ">= RTO"},
        {"UCX_UD_ZV_TIMEOUT", !(config->timeout > config->rto), "> RTO"},
        {"UCX_UD_ZV_ACK_DELAY", !(config->ack_delay > 0) || !(config->ack_delay < config->rto), "> 0 and < RTO"},
        {"UCX_UD_ZV_FAULT_DROP", bad_rate(s.fault.drop), "0..1"},
        {"UCX_UD_ZV_FAULT_DUP", bad_rate(s.fault.dup), "0..1"},
        {"UCX_UD_ZV_FAULT_REORDER", bad_rate(s.fault.reorder), "0..1"},
        {"UCX_UD_ZV_FAULT_DROP + FAULT_DUP + FAULT_REORDER", bad_rate(s.fault.drop + s.fault.dup + s.fault.reorder), "a sum of at most 1"},
    };
    ucs_status_t status = zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
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
