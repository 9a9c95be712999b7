// SPDX-License-Identifier: BSD-3-Clause
// uc_zv: the reliable-datagram core (src/rd) over connected UC queue pairs.
#ifndef ZV_UC_UC_IFACE_H
#define ZV_UC_UC_IFACE_H

#include "iface/conn.h"
#include "iface/qp_table.h"
#include "rd/rd_ep.h"
#include "uc/uc_wire.h"

#include <vector>

namespace zv::uc {

using namespace zv::rd; // uc_zv is the core's packets on connected UC QPs

/// uc_zv's settings beyond the core's (UCX_UC_ZV_*).
struct uc_settings {
    rd_settings             rd;
    unsigned                seg_size     = 0;  ///< largest active message
    unsigned                max_write    = 0;  ///< largest RDMA write per packet
    double                  conn_timeout = 0;  ///< seconds to connect
    /// Every message within one packet (auto: on for Soft-RoCE).
    ucs_on_off_auto_value_t one_packet   = UCS_CONFIG_AUTO;
};

/// What one connected QP carries: the peer's stream (its receive
/// connection, from the moment the QP is connected) and ours (the endpoint
/// that uses it, if any). They are partners: the receive connection's acks
/// ride in the endpoint's DATA.
struct qp_objs {
    rx_conn *conn = nullptr;
    rd_ep   *ep   = nullptr;
};

/// A connected QP in the error state, on its way back (uc.cc).
struct broken_qp {
    uint32_t qpn     = 0;
    /// The endpoint that posts on it (a destroyed one too, until freed),
    /// and its send queue's count when the marker was posted.
    rd_ep   *poster  = nullptr;
    uint64_t posted  = 0;
    bool     flushed = false; ///< the marker's completion came
};

/// One SRQ; connections set up by the shared connection manager; packets
/// matched to objects by the queue pair they arrive on.
struct uc_iface {
    rd_iface                 super;
    uc_settings              settings;
    verbs::srq               srq;
    iface::conn_manager      conn;
    iface::qp_table<qp_objs> by_qp;
    std::vector<broken_qp>   broken;          ///< usually empty
    unsigned                 resets_due = 0;  ///< of 'broken', flushed
    ucs_time_t               next_reset = 0;  ///< no reset before
    bool                     resetting  = false; ///< in conn.reconnect(): quiet
};

inline uc_iface *to_uc(rd_iface *iface) { return reinterpret_cast<uc_iface *>(iface); }
inline const uc_iface *to_uc(const rd_iface *iface)
{
    return reinterpret_cast<const uc_iface *>(iface);
}
inline uc_iface *to_uc(uct_iface_h iface) { return reinterpret_cast<uc_iface *>(iface); }

[[nodiscard]] ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const uc_settings &settings, uct_iface_h *iface_p);

// uc_put.cc
ucs_status_t ep_put_short(uct_ep_h ep, const void *buffer, unsigned length,
                          uint64_t remote_addr, uct_rkey_t rkey);
ssize_t ep_put_bcopy(uct_ep_h ep, uct_pack_callback_t pack_cb, void *arg,
                     uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp);

} // namespace zv::uc

#endif
