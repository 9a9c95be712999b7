// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for ud_zv and uc_zv: their config tables (UCX_UD_ZV_*, UCX_UC_ZV_*,
// sharing the reliability settings) and transport descriptors.
#include "glue/zv_glue.h"
#include "md/zv_md.h"
#include "uc/uc_iface.h"
#include "ud/ud_iface.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <algorithm>
#include <cstddef>
#include <string>

namespace {

/// What ud_zv and uc_zv share: queues and the software reliability.
struct zv_rel_config {
    unsigned           rx_queue_len;
    unsigned           rx_batch;
    unsigned           tx_queue_len;
    size_t             max_inline;
    unsigned           window;
    double             rto;
    double             rto_max;
    double             timeout;
    double             ack_delay;
    unsigned           max_peer_conns;
    unsigned long      tx_max_bufs;
    double             fault_drop;
    double             fault_dup;
    double             fault_reorder;
    unsigned long      fault_seed;
};

ucs_config_field_t zv_rel_config_table[] = {
    {"RX_QUEUE_LEN", "4096",
     "Number of receive buffers posted for the interface, shared by all peers:\n"
     "it does not grow with the number of endpoints.",
     offsetof(zv_rel_config, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"RX_BATCH", "64",
     "Receive buffers are re-posted once this many have been consumed, in one call.",
     offsetof(zv_rel_config, rx_batch), UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Send work requests that may be outstanding on the interface (data,\n"
     "retransmissions and acknowledgements together).",
     offsetof(zv_rel_config, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_INLINE", "128",
     "Largest packet copied into the work request itself (inline); the device\n"
     "may grant less.",
     offsetof(zv_rel_config, max_inline), UCS_CONFIG_TYPE_MEMUNITS},

    {"WINDOW", "256",
     "Packets an endpoint may have sent and not yet had acknowledged. Each is\n"
     "kept (one buffer, or the user's memory for zero-copy) until acknowledged,\n"
     "so this bounds the memory an endpoint holds for retransmission.",
     offsetof(zv_rel_config, window), UCS_CONFIG_TYPE_UINT},

    {"RTO", "10ms",
     "Initial and smallest retransmission timeout: unacknowledged packets are sent\n"
     "again after this long without an acknowledgement. Once round trips are\n"
     "measured the timeout is smoothed RTT + 4 x its variation (RFC 6298), never\n"
     "below this; each expiry doubles it up to RTO_MAX.",
     offsetof(zv_rel_config, rto), UCS_CONFIG_TYPE_TIME},

    {"RTO_MAX", "500ms",
     "Largest retransmission timeout (the cap of the doubling).",
     offsetof(zv_rel_config, rto_max), UCS_CONFIG_TYPE_TIME},

    {"TIMEOUT", "30s",
     "A peer that acknowledges nothing for this long while packets are\n"
     "outstanding is declared dead: its endpoint fails with an error.\n"
     "Detection takes between TIMEOUT and TIMEOUT + RTO_MAX.\n"
     "ud_zv: a receive connection that hears nothing from its endpoint for this\n"
     "long probes it; one whose endpoint answers no probe for as long again\n"
     "(its process is gone, or it does not progress) is freed. An endpoint that\n"
     "was only silent finds it again, where it left it, when it next sends.",
     offsetof(zv_rel_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"ACK_DELAY", "100us",
     "Longest time a receiver waits for its own traffic to carry an\n"
     "acknowledgement before sending one on its own (one is also sent after\n"
     "WINDOW/4 packets).",
     offsetof(zv_rel_config, ack_delay), UCS_CONFIG_TYPE_TIME},

    {"MAX_PEER_CONNS", "4096",
     "Connections one peer interface (one remote process's interface) may open\n"
     "to this interface. A peer asking for more is refused, with a warning once:\n"
     "a broken or hostile peer cannot exhaust this host's queue pairs or memory.\n"
     "UCP opens one or two per peer; a UCT user may open more (rel-bench: 1024).",
     offsetof(zv_rel_config, max_peer_conns), UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_BUFS", "inf",
     "Most send buffers (each a segment) the interface registers; \"inf\" for no\n"
     "limit. Sends beyond them wait for buffers to come back (UCT pending).",
     offsetof(zv_rel_config, tx_max_bufs), UCS_CONFIG_TYPE_ULUNITS},

    {"FAULT_DROP", "0",
     "Testing only: probability (0..1) that a received packet is dropped before\n"
     "the reliability layer sees it. 0 (the default) turns it off.",
     offsetof(zv_rel_config, fault_drop), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_DUP", "0",
     "Testing only: probability (0..1) that a received packet is handled twice.",
     offsetof(zv_rel_config, fault_dup), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_REORDER", "0",
     "Testing only: probability (0..1) that a received packet is held back and\n"
     "handled after the next one.",
     offsetof(zv_rel_config, fault_reorder), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_SEED", "1",
     "Testing only: seed of the fault-injection random sequence (the same seed\n"
     "gives the same decisions for the same packets).",
     offsetof(zv_rel_config, fault_seed), UCS_CONFIG_TYPE_ULONG},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

struct zv_ud_iface_config {
    uct_iface_config_t super;
    zv_rel_config      rel;
};

ucs_config_field_t zv_ud_iface_config_table[] = {
    {"", "", nullptr, offsetof(zv_ud_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {"", "", nullptr, offsetof(zv_ud_iface_config, rel),
     UCS_CONFIG_TYPE_TABLE(zv_rel_config_table)},
    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

struct zv_uc_iface_config {
    uct_iface_config_t super;
    zv_rel_config      rel;
    size_t             seg_size;
    size_t             max_write;
    double             conn_timeout;
    ucs_on_off_auto_value_t one_packet;
};

ucs_config_field_t zv_uc_iface_config_table[] = {
    // MAX_NUM_EPS=auto, as for rc_zv (src/iface/scale.h).
    {"", "MAX_NUM_EPS=auto", nullptr, offsetof(zv_uc_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {"", "", nullptr, offsetof(zv_uc_iface_config, rel),
     UCS_CONFIG_TYPE_TABLE(zv_rel_config_table)},

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

bool bad_rate(double p) { return !((p >= 0) && (p <= 1)); }

/// Settings and range checks shared by both transports; prefix names them.
ucs_status_t rel_settings(const zv_rel_config &c, const char *prefix,
                          zv::rd::rd_settings *s)
{
    s->common.rx_queue_len = c.rx_queue_len;
    s->common.tx_queue_len = c.tx_queue_len;
    s->rx_batch            = c.rx_batch;
    s->max_inline          = static_cast<unsigned>(c.max_inline);
    s->rel.window          = c.window;
    s->rel.rto_init        = ucs_time_from_sec(c.rto);
    s->rel.rto_max         = ucs_time_from_sec(c.rto_max);
    s->rel.peer_timeout    = ucs_time_from_sec(c.timeout);
    s->rel.ack_delay       = ucs_time_from_sec(c.ack_delay);
    s->rel.ack_every       = zv::rel::ack_every_for(c.window);
    s->common.max_peer_conns = c.max_peer_conns;
    s->common.tx_max_bufs    = (c.tx_max_bufs == UCS_ULUNITS_INF) ? 0 :
                               static_cast<unsigned>(std::min(c.tx_max_bufs, 1ul << 24));
    s->fault.drop          = c.fault_drop;
    s->fault.dup           = c.fault_dup;
    s->fault.reorder       = c.fault_reorder;
    s->fault.seed          = c.fault_seed;

    std::string p(prefix);
    const std::string names[] = {p + "RX_QUEUE_LEN", p + "RX_BATCH", p + "TX_QUEUE_LEN",
                                 p + "TX_MAX_INLINE", p + "WINDOW", p + "RTO",
                                 p + "RTO_MAX", p + "TIMEOUT", p + "ACK_DELAY",
                                 p + "FAULT_DROP", p + "FAULT_DUP", p + "FAULT_REORDER",
                                 p + "FAULT_DROP + FAULT_DUP + FAULT_REORDER",
                                 p + "MAX_PEER_CONNS", p + "TX_MAX_BUFS"};
    const zv::glue::range_check checks[] = {
        {names[0].c_str(), (c.rx_queue_len < 64) || (c.rx_queue_len > 65536), "64..65536"},
        {names[1].c_str(), (c.rx_batch == 0) || (c.rx_batch > c.rx_queue_len), "1..RX_QUEUE_LEN"},
        {names[2].c_str(), (c.tx_queue_len < 16) || (c.tx_queue_len > 16384), "16..16384"},
        {names[3].c_str(), c.max_inline > 1024, "0..1024"},
        {names[4].c_str(), (c.window < 2) || (c.window > zv::rel::max_window), "2..16384"},
        {names[5].c_str(), !(c.rto > 0), "> 0"},
        {names[6].c_str(), !(c.rto_max >= c.rto), ">= RTO"},
        {names[7].c_str(), !(c.timeout > c.rto), "> RTO"},
        {names[8].c_str(), !(c.ack_delay > 0) || !(c.ack_delay < c.rto), "> 0 and < RTO"},
        {names[9].c_str(), bad_rate(c.fault_drop), "0..1"},
        {names[10].c_str(), bad_rate(c.fault_dup), "0..1"},
        {names[11].c_str(), bad_rate(c.fault_reorder), "0..1"},
        {names[12].c_str(), bad_rate(c.fault_drop + c.fault_dup + c.fault_reorder), "a sum of at most 1"},
        {names[13].c_str(), (c.max_peer_conns == 0) || (c.max_peer_conns > 65536), "1..65536"},
        {names[14].c_str(), (c.tx_max_bufs != UCS_ULUNITS_INF) &&
                            ((c.tx_max_bufs < 16) || (c.tx_max_bufs > (1ul << 24))), "16..16m or inf"},
    };
    return zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
}

ucs_status_t zv_ud_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_ud_iface_config *>(uct_config);
    zv::rd::rd_settings s;
    ucs_status_t status = rel_settings(config->rel, "UCX_UD_ZV_", &s);
    if (status != UCS_OK) {
        return status;
    }
    return zv::ud::iface_open(md, worker, params, uct_config, s, iface_p);
}

ucs_status_t zv_uc_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_uc_iface_config *>(uct_config);
    zv::uc::uc_settings s;
    ucs_status_t status = rel_settings(config->rel, "UCX_UC_ZV_", &s.rd);
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

uct_tl_t ud_zv_tl = {
    /* name          */ "ud_zv",
    /* query_devices */ zv::glue::query_devices,
    /* iface_open    */ zv_ud_iface_open,
    /* config        */ {"ud_zv transport", "UD_ZV_", zv_ud_iface_config_table,
                         sizeof(zv_ud_iface_config), {nullptr, nullptr}},
    /* list          */ {nullptr, nullptr},
};

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

uct_tl_t *ud_tl() { return &ud_zv_tl; }
uct_tl_t *uc_tl() { return &uc_zv_tl; }

} // namespace zv::glue
