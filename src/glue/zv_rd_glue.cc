// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for what ud_zv and uc_zv share: the reliability settings' table
// and their checks, and the testing-only fault injection.
#include "glue/zv_rd_glue.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>
#include <ucs/time/time.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace {

/// Testing only: fault injection in the receive path, from the environment
/// (ZV_TESTING_UD_ZV_FAULT_DROP, _DUP, _REORDER: probabilities 0..1, a sum
/// of at most 1; _SEED), outside UCX's configuration and its reference.
ucs_status_t fault_settings(const char *tl_prefix, zv::iface::fault_settings *f)
{
    const zv::glue::var_name pv("ZV_TESTING_", tl_prefix);
    const char *p          = pv.c_str();
    const zv::glue::var_name names[] = {{p, "FAULT_DROP"}, {p, "FAULT_DUP"}, {p, "FAULT_REORDER"},
                              {p, "FAULT_SEED"}};
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
    const zv::glue::var_name sum(p, "FAULT_DROP + _DUP + _REORDER");
    const zv::glue::range_check checks[] = {
        {names[0].c_str(), bad(f->drop), "0..1"},
        {names[1].c_str(), bad(f->dup), "0..1"},
        {names[2].c_str(), bad(f->reorder), "0..1"},
        {sum.c_str(), bad(f->drop + f->dup + f->reorder), "a sum of at most 1"},
    };
    return zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
}

} // namespace

namespace zv::glue {

ucs_config_field_t rel_config_table[] = {
    {"WINDOW", "256",
     "Packets an endpoint may have sent and not yet had acknowledged. Each is\n"
     "kept (one buffer, or the user's memory for zero-copy) until acknowledged,\n"
     "so this bounds the memory an endpoint holds for retransmission.",
     offsetof(rel_config, window), UCS_CONFIG_TYPE_UINT},

    {"RTO", "10ms",
     "Initial and smallest retransmission timeout: unacknowledged packets are sent\n"
     "again after this long without an acknowledgement. Once round trips are\n"
     "measured the timeout is smoothed RTT + 4 x its variation (RFC 6298), never\n"
     "below this; each expiry doubles it up to RTO_MAX.",
     offsetof(rel_config, rto), UCS_CONFIG_TYPE_TIME},

    {"RTO_MAX", "500ms",
     "Largest retransmission timeout (the cap of the doubling).",
     offsetof(rel_config, rto_max), UCS_CONFIG_TYPE_TIME},

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
     offsetof(rel_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"ACK_DELAY", "100us",
     "Longest time a receiver waits for its own traffic to carry an\n"
     "acknowledgement before sending one on its own (one is also sent after\n"
     "WINDOW/4 packets).",
     offsetof(rel_config, ack_delay), UCS_CONFIG_TYPE_TIME},

    {"TX_MODERATION", "32",
     "Request a send completion for one send in this many on each queue pair\n"
     "(1..128, at most TX_QUEUE_LEN/2). The others need none: an acknowledgement\n"
     "releases a packet's buffer, and a completion also covers the sends before\n"
     "it. uc_zv: once TX_QUEUE_LEN/2 sends over all its queue pairs wait\n"
     "uncovered, every send is signaled until completions cover them.",
     offsetof(rel_config, tx_moderation), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

ucs_status_t rel_settings(const queue_config &q, const rel_config &c,
                          const char *prefix, const char *tl_prefix, rd::rd_settings *s)
{
    ucs_status_t status = queue_settings(q, prefix, {64, 16}, &s->common, &s->rx_batch,
                                         &s->max_inline);
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

    const char *p          = prefix;
    const var_name names[] = {{p, "WINDOW"},  {p, "RTO"},       {p, "RTO_MAX"},
                              {p, "TIMEOUT"}, {p, "ACK_DELAY"}, {p, "TX_MODERATION"}};
    const range_check checks[] = {
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
    status = check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
    return (status == UCS_OK) ? fault_settings(tl_prefix, &s->fault) : status;
}

} // namespace zv::glue
