// SPDX-License-Identifier: BSD-3-Clause
// What the zv transports share: the base UCT interface on one port of a zv md.
#ifndef ZV_IFACE_ZV_IFACE_H
#define ZV_IFACE_ZV_IFACE_H

#include "iface/scale.h"
#include "md/zv_md.h"
#include "verbs/qp.h"
#include "verbs/route.h"

#include "ucx/compat.h"

#include <array>
#include <cstring>
#include <new>
#include <vector>

namespace zv::iface {

/// Whether a progress call that found 'rx_found' receives also polls the
/// send CQ. Send completions only give back resources: a call that found
/// receives leaves them to the next one (as UCX's rc_verbs does), which
/// saves a poll per message; every 16th call ('call': the calls so far)
/// and whenever half of 'limit' work requests are posted poll anyway, so
/// that a stream of receives cannot starve the sends.
inline bool poll_tx_now(unsigned rx_found, unsigned call, unsigned posted, unsigned limit)
{
    return (rx_found == 0) || ((call & 15) == 0) || (posted >= limit / 2);
}

/// Address of a port as peers see it (packed into UCT device addresses).
struct __attribute__((packed)) device_addr {
    uint8_t  flags;     ///< bit 0: RoCE (Ethernet link layer)
    uint16_t lid;       ///< IB only
    uint8_t  gid[16];
};

/// Bytes in an iov list (a count of 0 counts as 1, as the zv transports
/// post it).
inline size_t iov_total(const uct_iov_t *iov, size_t iovcnt)
{
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        total += iov[i].length * (iov[i].count ? iov[i].count : 1);
    }
    return total;
}

/// A queue pair number as interface addresses carry it: 3 bytes, low first.
inline void pack_qpn(uint8_t out[3], uint32_t qpn)
{
    out[0] = static_cast<uint8_t>(qpn);
    out[1] = static_cast<uint8_t>(qpn >> 8);
    out[2] = static_cast<uint8_t>(qpn >> 16);
}

inline uint32_t unpack_qpn(const uint8_t in[3])
{
    return in[0] | (in[1] << 8) | (static_cast<uint32_t>(in[2]) << 16);
}

/// A peer port's GID as a map key: a value, so that finding a peer
/// allocates nothing (design.md, "Out of memory").
using gid_key_t = std::array<uint8_t, sizeof(device_addr::gid)>;

inline gid_key_t gid_key(const device_addr &a)
{
    gid_key_t key;
    std::memcpy(key.data(), a.gid, key.size());
    return key;
}

/// A peer port (GID, then LID low byte first): the key of its address handle.
using port_key_t = std::array<uint8_t, sizeof(device_addr::gid) + 2>;

inline port_key_t port_key(const device_addr &a)
{
    port_key_t key;
    std::memcpy(key.data(), a.gid, sizeof(a.gid));
    key[sizeof(a.gid)]     = static_cast<uint8_t>(a.lid);
    key[sizeof(a.gid) + 1] = static_cast<uint8_t>(a.lid >> 8);
    return key;
}

/// A peer's device address as the verbs layer takes it (address handles,
/// connecting a queue pair); 'rd_atomic': what the peer's QP serves (its
/// connection message says, see conn_msg), 0 if unknown.
inline verbs::remote_port to_remote(const device_addr &a, uint8_t rd_atomic = 0)
{
    verbs::remote_port r;
    r.is_roce   = (a.flags & 1) != 0;
    r.lid       = a.lid;
    r.rd_atomic = rd_atomic;
    std::memcpy(r.gid.raw, a.gid, sizeof(a.gid));
    return r;
}

/// Settings shared by every zv transport (the glue fills them from config).
struct iface_settings {
    unsigned rx_queue_len; ///< receive buffers posted to the shared queue
    unsigned tx_queue_len; ///< send work requests in flight per interface
    /// Receive-side connections one peer interface may hold here (a peer
    /// asking for more is refused: MAX_PEER_CONNS).
    unsigned max_peer_conns = 4096;
    /// Most send (bounce) buffers the interface registers; 0: no limit
    /// (TX_MAX_BUFS).
    unsigned tx_max_bufs = 0;
};

struct zv_iface;

/// A transport's handler of the device's asynchronous events; called on
/// the interface's own thread, from the worker's progress.
using event_handler = void (*)(zv_iface *iface, const verbs::async_event &ev);

/// Base of every zv interface. 'super' first: UCT casts uct_iface_h to it.
struct zv_iface {
    uct_base_iface_t         super;
    md::zv_md               *md;
    const verbs::port_info  *port;
    iface_settings           settings;
    /// What max_num_eps "auto" (the connected transports' default) stands
    /// for; unlimited unless the transport sets it (set_auto_max_eps).
    size_t                   auto_max_eps = SIZE_MAX;
    /// Added to the port's latency: the opening thread's CPUs are not all
    /// local to the device (verbs::remote_latency), so UCP prefers a near one.
    double                   remote_latency = 0;
    event_handler            on_event  = nullptr;
    int                      events_id = -1; ///< listener id at md->events
    /// The transport's name ("rc_zv"), for logs; set by the transport.
    const char              *tl_name   = "zv";
    /// A device-fatal event arrived: no new endpoints (set by the handler).
    bool                     device_lost = false;
    /// RoCE over IPv4: which peers' GIDs this port can reach.
    verbs::ipv4_reach        reach;
};

/// Initialise the UCX base interface inside 'iface' and bind it to the
/// port named by params. On failure nothing needs cleanup.
[[nodiscard]] ucs_status_t init(zv_iface *iface, const uct_iface_ops_t *ops,
                                uct_iface_internal_ops_t *internal_ops,
                                uct_md_h md, uct_worker_h worker,
                                const uct_iface_params_t *params,
                                const uct_iface_config_t *config,
                                const iface_settings &settings);
/// Undo init() (and watch_events()).
void cleanup(zv_iface *iface);

/// Hand the device's asynchronous events (port, QP, SRQ, device) to
/// 'handler' from now until cleanup(). Each batch runs as a one-shot
/// callback on the worker's progress.
[[nodiscard]] ucs_status_t watch_events(zv_iface *iface, event_handler handler);

/// Report an endpoint failure to UCT's error handling (UCP). When nobody
/// handles it (UCP without error handling, as Open MPI's pml ucx runs),
/// log 'what' at the level UCX's own transports use: fatal, which ends the
/// process with the reason, instead of leaving its requests to hang.
void report_ep_failure(zv_iface *iface, uct_ep_h ep, ucs_status_t status,
                       const char *what);

/// Fill what every zv transport reports the same way (bandwidth, latency,
/// device address size, priority).
void query_common(zv_iface *iface, uct_iface_attr_t *attr);

/// A connected transport's max_num_eps "auto": max_connections() of
/// 'cost' against this process's share of the node and of the device
/// (scale.h); logged at debug level with its terms.
void set_auto_max_eps(zv_iface *iface, const conn_cost &cost, const char *tl_name);

/// ep_create's checks before it takes anything: the parameters name the
/// peer's device and interface addresses (every zv transport connects to an
/// interface), and the device is not lost. A status with the reason logged
/// otherwise; 'iface' is null when params names none.
[[nodiscard]] ucs_status_t ep_create_allowed(const uct_ep_params_t *params, zv_iface *iface);

/// A new endpoint of a zv transport (Ep's 'super' is its uct_base_ep_t),
/// its UCT base initialised on 'iface': UCS_OK, or a status with nothing
/// left behind.
template <typename Ep>
[[nodiscard]] ucs_status_t new_ep(zv_iface *iface, Ep **ep_p)
{
    auto *ep = new (std::nothrow) Ep{};
    if (ep == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    int init_count            = 1;
    const ucs_status_t status = uct_base_ep_t_init(&ep->super, &uct_base_ep_t_class,
                                                   &init_count, &iface->super);
    if (status != UCS_OK) {
        delete ep;
        return status;
    }
    *ep_p = ep;
    return UCS_OK;
}

/// Undo new_ep() (an endpoint that never got further): its UCT base's
/// cleanup, then the endpoint.
template <typename Ep> void delete_new_ep(Ep *ep)
{
    ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &ep->super, -1);
    delete ep;
}

ucs_status_t get_device_address(uct_iface_h iface, uct_device_addr_t *addr);
void progress_disable(uct_iface_h iface, unsigned flags);

/// Whether the port of 'addr' can be reached from this one: the same IB
/// subnet, or for RoCE the same link layer and a route (verbs::ipv4_reach).
int is_device_reachable(zv_iface *iface, const uct_device_addr_t *addr);
/// The same, saying why not in 'why'.
int is_device_reachable(zv_iface *iface, const uct_device_addr_t *addr,
                        const ucx::reach_reason &why);
/// Whether two device addresses name the same port: for RoCE the same GID,
/// for InfiniBand the same LID and GID interface id (as UCX's ib transports).
bool same_device(const device_addr &a, const device_addr &b);
bool same_device(const device_addr &a, const uct_device_addr_t *b);
/// UCT's iface_is_reachable of every zv transport (a device address is
/// needed; the interface address says nothing more).
int is_reachable(const uct_iface_h iface, const uct_device_addr_t *dev_addr,
                 const uct_iface_addr_t *iface_addr);
/// The same with a reason and a scope (ucx::is_reachable_fn).
int is_reachable_v2(uct_iface_h iface, const uct_device_addr_t *dev_addr,
                    const uct_iface_addr_t *iface_addr, bool same_device,
                    const ucx::reach_reason &why);

ucs_status_t estimate_perf(uct_iface_h iface, uct_perf_attr_t *perf_attr);
void vfs_refresh(uct_iface_h iface);
ucs_status_t ep_query(uct_ep_h ep, uct_ep_attr_t *attr);

/// UCT's internal ops of a zv transport whose endpoints tell their peer
/// with Connected (ucx::ep_is_connected_fn): a performance estimate from
/// the attributes, reachability as is_reachable_v2, no vfs, ep query or
/// invalidate.
template <ucx::ep_is_connected_fn Connected>
inline uct_iface_internal_ops_t internal_ops =
        ucx::make_internal_ops<estimate_perf, vfs_refresh, ep_query, is_reachable_v2,
                               Connected>();

} // namespace zv::iface

#endif
