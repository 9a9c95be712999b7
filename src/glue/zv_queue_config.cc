// SPDX-License-Identifier: BSD-3-Clause
// The queue settings every zv transport has (UCX_RC_ZV_RX_QUEUE_LEN, ...):
// one table, included by each transport's with its own defaults.
#include "glue/zv_glue.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>

#include <algorithm>
#include <cstddef>

namespace zv::glue {

ucs_config_field_t queue_config_table[] = {
    {"RX_QUEUE_LEN", "4096",
     "Receive buffers posted for the interface (rc_zv, uc_zv: to its shared\n"
     "receive queue; ud_zv: to its queue pair). Shared by all peers: it does not\n"
     "grow with the number of endpoints.",
     offsetof(queue_config, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"RX_BATCH", "64",
     "Receive buffers are re-posted once this many have been consumed, in one call.",
     offsetof(queue_config, rx_batch), UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Send work requests that may be outstanding on one queue pair: an\n"
     "endpoint's (rc_zv, uc_zv) or the interface's one (ud_zv: data,\n"
     "retransmissions and acknowledgements together). uc_zv's endpoints also\n"
     "share this many in total.",
     offsetof(queue_config, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_INLINE", "128",
     "Largest send copied into the work request itself (inline); the device\n"
     "may grant less.",
     offsetof(queue_config, max_inline), UCS_CONFIG_TYPE_MEMUNITS},

    {"MAX_PEER_CONNS", "4096",
     "Connections one peer interface (one remote process's interface) may open\n"
     "to this interface. A peer asking for more is refused, with a warning once:\n"
     "a broken or hostile peer cannot exhaust this host's queue pairs or memory.\n"
     "UCP opens one or two per peer; a UCT user may open more (rel-bench: 1024).",
     offsetof(queue_config, max_peer_conns), UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_BUFS", "inf",
     "Most send buffers (each a segment) the interface registers; \"inf\" for no\n"
     "limit. Sends beyond them wait for buffers to come back (UCT pending).",
     offsetof(queue_config, tx_max_bufs), UCS_CONFIG_TYPE_ULUNITS},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

ucs_status_t queue_settings(const queue_config &c, const char *prefix,
                            const queue_limits &limits, iface::iface_settings *common,
                            unsigned *rx_batch, unsigned *max_inline)
{
    common->rx_queue_len   = c.rx_queue_len;
    common->tx_queue_len   = c.tx_queue_len;
    common->max_peer_conns = c.max_peer_conns;
    common->tx_max_bufs    = (c.tx_max_bufs == UCS_ULUNITS_INF) ? 0 :
                             static_cast<unsigned>(std::min(c.tx_max_bufs, 1ul << 24));
    *rx_batch              = c.rx_batch;
    *max_inline            = static_cast<unsigned>(std::min<size_t>(c.max_inline, 1u << 20));

    const char *p          = prefix;
    const var_name names[] = {{p, "RX_QUEUE_LEN"},  {p, "RX_BATCH"},       {p, "TX_QUEUE_LEN"},
                              {p, "TX_MAX_INLINE"}, {p, "MAX_PEER_CONNS"}, {p, "TX_MAX_BUFS"}};
    char rx_range[32], tx_range[32];
    std::snprintf(rx_range, sizeof(rx_range), "%u..65536", limits.min_rx_queue_len);
    std::snprintf(tx_range, sizeof(tx_range), "%u..16384", limits.min_tx_queue_len);
    const range_check checks[] = {
        {names[0].c_str(), (c.rx_queue_len < limits.min_rx_queue_len) || (c.rx_queue_len > 65536),
         rx_range},
        {names[1].c_str(), (c.rx_batch == 0) || (c.rx_batch > c.rx_queue_len), "1..RX_QUEUE_LEN"},
        {names[2].c_str(), (c.tx_queue_len < limits.min_tx_queue_len) || (c.tx_queue_len > 16384),
         tx_range},
        {names[3].c_str(), c.max_inline > 1024, "0..1024"},
        {names[4].c_str(), (c.max_peer_conns == 0) || (c.max_peer_conns > 65536), "1..65536"},
        {names[5].c_str(), (c.tx_max_bufs != UCS_ULUNITS_INF) &&
                           ((c.tx_max_bufs < 16) || (c.tx_max_bufs > (1ul << 24))),
         "16..16m or inf"},
    };
    return check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
}

} // namespace zv::glue
