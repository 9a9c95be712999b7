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
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace {

/// What ud_zv and uc_zv share: queues, the software reliability and send
/// moderation.
struct zv_rel_config {
    unsigned               window;
    double                 rto;
    double                 rto_max;
    double                 timeout;
    double                 ack_delay;
    unsigned               tx_moderation;
};

ucs_config_field_t zv_rel_config_table[] = {
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

    {"TIMEOUT", "10s",
     "A peer from which nothing comes for this long while packets are\n"
     "outstanding (no acknowledgement, not even one of nothing new) is declared\n"
     "dead: its endpoint fails with an error. Detection takes between TIMEOUT\n"
     "and TIMEOUT + RTO_MAX. A peer whose application computes is not dead: its\n"
     "async thread (UCX_ASYNC_MODE=thread) answers within 0.2 s while it does\n"
     "not progress, so this much silence means a process gone, or a host or\n"
     "link down for longer than this (a shorter outage is ridden out). While\n"
     "the interface's own port is down, nothing is sent and no peer times out;\n"
     "endpoints fail when it stays down for 3 x TIMEOUT.\n"
     "ud_zv: a receive connection that hears nothing from its endpoint for this\n"
     "long probes it; one whose endpoint answers no probe for as long again\n"
     "(its process is gone or stopped) is freed. An endpoint that was only\n"
     "silent finds it again, where it left it, when it next sends.",
     offsetof(zv_rel_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"ACK_DELAY", "100us",
     "Longest time a receiver waits for its own traffic to carry an\n"
     "acknowledgement before sending one on its own (one is also sent after\n"
     "WINDOW/4 packets).",
     offsetof(zv_rel_config, ack_delay), UCS_CONFIG_TYPE_TIME},

    {"TX_MODERATION", "32",
     "Request a send completion for one send in this many on each queue pair\n"
     "(1..128, at most TX_QUEUE_LEN/2). The others need none: an acknowledgement\n"
     "releases a packet's buffer, and a completion also covers the sends before\n"
     "it. uc_zv: once TX_QUEUE_LEN/2 sends over all its queue pairs wait\n"
     "uncovered, every send is signaled until completions cover them.",
     offsetof(zv_rel_config, tx_moderation), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

struct zv_ud_iface_config {
    uct_iface_config_t     super;
    zv::glue::queue_config queue;
    zv_rel_config          rel;
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
     UCS_CONFIG_TYPE_TABLE(zv_rel_config_table)},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

struct zv_uc_iface_config {
    uct_iface_config_t super;
    zv::glue::queue_config queue;
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
    {"", "", nullptr, offsetof(zv_uc_iface_config, queue),
     UCS_CONFIG_TYPE_TABLE(zv::glue::queue_config_table)},
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

/// Testing only: fault injection in the receive path, from the environment
/// (ZV_TESTING_UD_ZV_FAULT_DROP, _DUP, _REORDER: probabilities 0..1, a sum
/// of at most 1; _SEED), outside UCX's configuration and its reference.
ucs_status_t fault_settings(const char *tl_prefix, zv::iface::fault_settings *f)
{
    const std::string p = std::string("ZV_TESTING_") + tl_prefix;
    const std::string names[] = {p + "FAULT_DROP", p + "FAULT_DUP", p + "FAULT_REORDER",
                                 p + "FAULT_SEED"};
    double *rates[] = {&f->drop, &f->dup, &f->reorder};
    for (unsigned i = 0; i < 4; ++i) {
        const char *v = getenv(names[i].c_str());
        if ((v == nullptr) || (*v == '\0')) {
            continue;
        }
        char *end;
        errno = 0;
        if (i < 3) {
            *rates[i] = std::strtod(v, &end);
        } else {
            f->seed = std::strtoull(v, &end, 0);
        }
        if ((*end != '\0') || (errno != 0)) {
            ucs_error("%s='%s' is out of range (allowed: %s)", names[i].c_str(), v,
                      (i < 3) ? "0..1" : "an unsigned integer");
            return UCS_ERR_INVALID_PARAM;
        }
    }
    auto bad = [](double r) { return !((r >= 0) && (r <= 1)); };
    const std::string sum = p + "FAULT_DROP + _DUP + _REORDER";
    const zv::glue::range_check checks[] = {
        {names[0].c_str(), bad(f->drop), "0..1"},
        {names[1].c_str(), bad(f->dup), "0..1"},
        {names[2].c_str(), bad(f->reorder), "0..1"},
        {sum.c_str(), bad(f->drop + f->dup + f->reorder), "a sum of at most 1"},
    };
    return zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
}

/// Settings and range checks shared by both transports; prefix names them
/// ("UCX_UD_ZV_"), tl_prefix is the same without UCX_.
ucs_status_t rel_settings(const zv::glue::queue_config &q, const zv_rel_config &c,
                          const char *prefix, const char *tl_prefix, zv::rd::rd_settings *s)
{
    ucs_status_t status = zv::glue::queue_settings(q, prefix, {64, 16}, &s->common,
                                                   &s->rx_batch, &s->max_inline);
    if (status != UCS_OK) {
        return status;
    }
    s->rel.window          = c.window;
    s->rel.rto_init        = ucs_time_from_sec(c.rto);
    s->rel.rto_max         = ucs_time_from_sec(c.rto_max);
    s->rel.peer_timeout    = ucs_time_from_sec(c.timeout);
    s->rel.ack_delay       = ucs_time_from_sec(c.ack_delay);
    s->rel.ack_every       = zv::rel::ack_every_for(c.window);
    s->tx_moderation       = c.tx_moderation;

    const std::string p(prefix);
    const std::string names[] = {p + "WINDOW", p + "RTO", p + "RTO_MAX", p + "TIMEOUT",
                                 p + "ACK_DELAY", p + "TX_MODERATION"};
    const zv::glue::range_check checks[] = {
        {names[0].c_str(), (c.window < 2) || (c.window > zv::rel::max_window), "2..16384"},
        {names[1].c_str(), !(c.rto > 0), "> 0"},
        {names[2].c_str(), !(c.rto_max >= c.rto), ">= RTO"},
        {names[3].c_str(), !(c.timeout > c.rto), "> RTO"},
        {names[4].c_str(), !(c.ack_delay > 0) || !(c.ack_delay < c.rto), "> 0 and < RTO"},
        {names[5].c_str(),
         (c.tx_moderation == 0) || (c.tx_moderation > zv::rd::max_tx_moderation) ||
         (c.tx_moderation > s->common.tx_queue_len / 2),
         "1..128, at most TX_QUEUE_LEN/2"},
    };
    status = zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
    return (status == UCS_OK) ? fault_settings(tl_prefix, &s->fault) : status;
}

ucs_status_t zv_ud_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_ud_iface_config *>(uct_config);
    zv::rd::rd_settings s;
    ucs_status_t status = rel_settings(config->queue, config->rel, "UCX_UD_ZV_", "UD_ZV_", &s);
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
    ucs_status_t status = rel_settings(config->queue, config->rel, "UCX_UC_ZV_", "UC_ZV_", &s.rd);
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
