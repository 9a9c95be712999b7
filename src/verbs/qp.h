// SPDX-License-Identifier: BSD-3-Clause
// Queue pairs: creation and the INIT->RTR->RTS bring-up, in one place.
#ifndef ZV_VERBS_QP_H
#define ZV_VERBS_QP_H

#include "verbs/device.h"
#include "verbs/owned.h"

#include <ucs/time/time_def.h>

namespace zv::verbs {

/// Where a peer's port is: what an address handle or an RC path needs.
struct remote_port {
    bool     is_roce   = false;
    uint16_t lid       = 0;
    ibv_gid  gid       = {};
    /// RC: the RDMA READ/atomics the peer's QP serves at a time, as it told
    /// when connecting; 0 when it did not say (a zverbs before it did, which
    /// served legacy_rd_atomic).
    uint8_t  rd_atomic = 0;
};

/// What a peer that does not say serves: the value zverbs had fixed.
constexpr uint8_t legacy_rd_atomic = 4;

/// Parameters of a connected (RC or UC) queue pair.
struct connected_qp_params {
    ibv_qp_type type            = IBV_QPT_RC;
    unsigned    max_send_wr     = 256;
    unsigned    max_send_sge    = 4;
    unsigned    max_inline      = 128;
    ibv_cq     *send_cq         = nullptr;
    ibv_cq     *recv_cq         = nullptr;
    ibv_srq    *srq             = nullptr;
};

/// Transport timing of a connected QP (RC only: UC has no acks).
struct rc_timing {
    uint8_t timeout       = 18; ///< 4.096us * 2^timeout per retry
    uint8_t retry_cnt     = 6;  ///< 7 means "forever" on some devices: avoid
    uint8_t rnr_retry     = 7;  ///< receiver-not-ready: retry forever
    uint8_t min_rnr_timer = 12; ///< 0.64 ms
    uint8_t max_rd_atomic      = 4; ///< RDMA READ/atomics we issue at a time (and
                                    ///< no more than the peer serves)
    uint8_t max_dest_rd_atomic = 4; ///< the peer's we serve at a time
};

/// 'timing' capped to what the device takes (max_qp_init_rd_atom,
/// max_qp_rd_atom); a device that takes none leaves 0 (no READ, no atomic).
rc_timing cap_to_device(rc_timing timing, const ibv_device_attr &attr);

/// Create an RC or UC QP in RESET state into *qp_p; *max_inline is what
/// the device granted. Errors are logged with errno.
[[nodiscard]] ucs_status_t create_connected_qp(const device &dev,
                                               const connected_qp_params &params,
                                               qp *qp_p, unsigned *max_inline);

/// RESET -> INIT -> RTR -> RTS for an RC/UC QP towards remote_qpn. The
/// access flags are what peers may do to our memory through this QP. A
/// failed step is logged as an error ('quiet': at debug level, for a
/// caller that tries again and says so itself).
[[nodiscard]] ucs_status_t connect_qp(ibv_qp *qp, const port_info &port,
                                      const remote_port &remote,
                                      uint32_t remote_qpn, int access,
                                      const rc_timing &timing, bool quiet = false);

/// Create a UD QP into *qp_p and bring it to RTS with the given qkey.
[[nodiscard]] ucs_status_t create_ud_qp(const device &dev, const port_info &port,
                                        ibv_cq *send_cq, ibv_cq *recv_cq,
                                        unsigned max_send_wr, unsigned max_recv_wr,
                                        unsigned max_inline, uint32_t qkey,
                                        qp *qp_p, unsigned max_send_sge = 1);

/// Whether the QP is in the error state. A UD QP gets there when a send
/// fails locally: on Soft-RoCE, a send while the link is down.
[[nodiscard]] bool qp_in_error(ibv_qp *qp);

/// Bring a UD QP in any state back to RTS (RESET, INIT, RTR, RTS), keeping
/// its number, so peers reach it again at the same address. Call it once
/// every work request posted to it has completed (an errored QP flushes
/// them all): the reset drops what is still queued without completions.
[[nodiscard]] ucs_status_t reset_ud_qp(ibv_qp *qp, const port_info &port, uint32_t qkey);

/// Address handle towards a peer's port, into *ah_p.
[[nodiscard]] ucs_status_t create_ah(const device &dev, const port_info &port,
                                     const remote_port &remote, ah *ah_p);

/// Move a QP to the ERROR state (flushes its outstanding work requests); a
/// QP still in RESET, never connected, has none and is left as it is.
void qp_to_error(ibv_qp *qp);

/// A QP in the error state whose receive queue still holds work requests
/// that will never complete by themselves: Soft-RoCE (Linux 6.1) flushes a
/// receive queue only when its QP enters the error state or a packet
/// arrives, and receives posted after that (a refill racing with the
/// error) stay queued without a completion, so a reset that waits for
/// them waits forever. Entering the error state again flushes them. At
/// most once per 'interval' (a syscall); *last is the caller's.
void flush_receives(ibv_qp *qp, ucs_time_t *last, ucs_time_t interval);

/// Human-readable name of a work-completion status, and its UCX status.
const char *wc_status_str(ibv_wc_status status);
[[nodiscard]] ucs_status_t status_from_wc(ibv_wc_status status);

} // namespace zv::verbs

#endif
