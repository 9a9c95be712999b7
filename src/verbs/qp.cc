// SPDX-License-Identifier: BSD-3-Clause
// Queue-pair creation and state transitions.
#include "verbs/qp.h"

#include <ucs/time/time.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace zv::verbs {

namespace {

ibv_ah_attr make_ah_attr(const port_info &port, const remote_port &remote)
{
    ibv_ah_attr ah = {};
    ah.port_num    = port.port_num;
    ah.sl          = 0;
    ah.dlid        = remote.lid;
    if (remote.is_roce || port.is_roce) {
        ah.is_global         = 1;
        ah.grh.dgid          = remote.gid;
        ah.grh.sgid_index    = static_cast<uint8_t>(port.gid_index);
        ah.grh.hop_limit     = 64;
        ah.grh.traffic_class = 0;
    }
    return ah;
}

} // namespace

ucs_status_t create_connected_qp(const device &dev, const connected_qp_params &params,
                                 qp *qp_p, unsigned *max_inline)
{
    ibv_qp_init_attr attr   = {};
    attr.qp_type            = params.type;
    attr.send_cq            = params.send_cq;
    attr.recv_cq            = params.recv_cq;
    attr.srq                = params.srq;
    attr.cap.max_send_wr    = params.max_send_wr;
    attr.cap.max_send_sge   = params.max_send_sge;
    attr.cap.max_recv_wr    = params.srq ? 0 : 1;
    attr.cap.max_recv_sge   = 1;
    attr.cap.max_inline_data = params.max_inline;
    attr.sq_sig_all         = 0;

    ibv_qp *created = ibv_create_qp(dev.pd(), &attr);
    if (created == nullptr) {
        ucs_error("%s: ibv_create_qp(%s, max_send_wr=%u, max_inline=%u) failed: %m",
                  dev.name().c_str(), params.type == IBV_QPT_RC ? "RC" : "UC",
                  params.max_send_wr, params.max_inline);
        return status_from_errno(errno);
    }
    qp_p->reset(created);
    *max_inline = attr.cap.max_inline_data;
    return UCS_OK;
}

rc_timing cap_to_device(rc_timing timing, const ibv_device_attr &attr)
{
    timing.max_rd_atomic      = static_cast<uint8_t>(
            std::min<int>(timing.max_rd_atomic, std::max(attr.max_qp_init_rd_atom, 0)));
    timing.max_dest_rd_atomic = static_cast<uint8_t>(
            std::min<int>(timing.max_dest_rd_atomic, std::max(attr.max_qp_rd_atom, 0)));
    return timing;
}

ucs_status_t connect_qp(ibv_qp *qp, const port_info &port, const remote_port &remote,
                        uint32_t remote_qpn, int access, const rc_timing &timing,
                        bool quiet)
{
    const ucs_log_level_t level = quiet ? UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_ERROR;
    const bool rc  = (qp->qp_type == IBV_QPT_RC);
    ibv_qp_attr a  = {};
    int ret;

    a.qp_state        = IBV_QPS_INIT;
    a.pkey_index      = 0;
    a.port_num        = port.port_num;
    a.qp_access_flags = access;
    ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                IBV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        ucs_log(level, "qp 0x%x: modify to INIT failed: %s", qp->qp_num, strerror(ret));
        return status_from_errno(ret);
    }

    a                    = {};
    a.qp_state           = IBV_QPS_RTR;
    a.path_mtu           = port.attr.active_mtu;
    a.dest_qp_num        = remote_qpn;
    a.rq_psn             = 0;
    a.ah_attr            = make_ah_attr(port, remote);
    int mask             = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                           IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (rc) {
        a.max_dest_rd_atomic = timing.max_dest_rd_atomic;
        a.min_rnr_timer      = timing.min_rnr_timer;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    ret = ibv_modify_qp(qp, &a, mask);
    if (ret != 0) {
        ucs_log(level, "qp 0x%x: modify to RTR (remote qp 0x%x) failed: %s", qp->qp_num,
                  remote_qpn, strerror(ret));
        return status_from_errno(ret);
    }

    a          = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn   = 0;
    mask       = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) {
        a.timeout       = timing.timeout;
        a.retry_cnt     = timing.retry_cnt;
        a.rnr_retry     = timing.rnr_retry;
        a.max_rd_atomic = std::min(timing.max_rd_atomic,
                                   (remote.rd_atomic != 0) ? remote.rd_atomic : legacy_rd_atomic);
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_MAX_QP_RD_ATOMIC;
    }
    ret = ibv_modify_qp(qp, &a, mask);
    if (ret != 0) {
        ucs_log(level, "qp 0x%x: modify to RTS failed: %s", qp->qp_num, strerror(ret));
        return status_from_errno(ret);
    }
    return UCS_OK;
}

namespace {

/// RESET -> INIT -> RTR -> RTS for a UD QP.
ucs_status_t bring_up_ud(ibv_qp *qp, const port_info &port, uint32_t qkey)
{
    ibv_qp_attr a = {};
    a.qp_state    = IBV_QPS_INIT;
    a.pkey_index  = 0;
    a.port_num    = port.port_num;
    a.qkey        = qkey;
    int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_QKEY);
    if (ret == 0) {
        a          = {};
        a.qp_state = IBV_QPS_RTR;
        ret        = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    }
    if (ret == 0) {
        a          = {};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn   = 0;
        ret        = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (ret != 0) {
        ucs_error("qp 0x%x: UD bring-up failed: %s", qp->qp_num, strerror(ret));
        return status_from_errno(ret);
    }
    return UCS_OK;
}

} // namespace

ucs_status_t create_ud_qp(const device &dev, const port_info &port, ibv_cq *send_cq,
                          ibv_cq *recv_cq, unsigned max_send_wr, unsigned max_recv_wr,
                          unsigned max_inline, uint32_t qkey, qp *qp_p,
                          unsigned max_send_sge)
{
    ibv_qp_init_attr init = {};
    init.qp_type          = IBV_QPT_UD;
    init.send_cq          = send_cq;
    init.recv_cq          = recv_cq;
    init.cap.max_send_wr  = max_send_wr;
    init.cap.max_recv_wr  = max_recv_wr;
    init.cap.max_send_sge = max_send_sge;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = max_inline;
    qp created(ibv_create_qp(dev.pd(), &init));
    if (!created) {
        ucs_error("%s: ibv_create_qp(UD) failed: %m", dev.name().c_str());
        return status_from_errno(errno);
    }

    ucs_status_t status = bring_up_ud(created.get(), port, qkey);
    if (status != UCS_OK) {
        return status;
    }
    *qp_p = std::move(created);
    return UCS_OK;
}

bool qp_in_error(ibv_qp *qp)
{
    ibv_qp_attr a;
    ibv_qp_init_attr init;
    return (ibv_query_qp(qp, &a, IBV_QP_STATE, &init) == 0) && (a.qp_state == IBV_QPS_ERR);
}

ucs_status_t reset_ud_qp(ibv_qp *qp, const port_info &port, uint32_t qkey)
{
    ibv_qp_attr a = {};
    a.qp_state    = IBV_QPS_RESET;
    int ret       = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    if (ret != 0) {
        ucs_error("qp 0x%x: modify to RESET failed: %s", qp->qp_num, strerror(ret));
        return status_from_errno(ret);
    }
    return bring_up_ud(qp, port, qkey);
}

ucs_status_t create_ah(const device &dev, const port_info &port,
                       const remote_port &remote, ah *ah_p)
{
    ibv_ah_attr attr = make_ah_attr(port, remote);
    ibv_ah *created  = ibv_create_ah(dev.pd(), &attr);
    if (created == nullptr) {
        ucs_error("%s:%u: ibv_create_ah() failed: %m", dev.name().c_str(),
                  port.port_num);
        return status_from_errno(errno);
    }
    ah_p->reset(created);
    return UCS_OK;
}

void destroy_qp(ibv_qp *qp)
{
    if (qp == nullptr) {
        return;
    }
    uint32_t qpn = qp->qp_num;
    int ret      = ibv_destroy_qp(qp);
    if (ret != 0) {
        ucs_warn("qp 0x%x: ibv_destroy_qp() failed: %s", qpn, strerror(ret));
    }
}

void qp_to_error(ibv_qp *qp)
{
    if (qp->state == IBV_QPS_RESET) {
        return; // never connected: nothing to flush (and RESET -> ERR is refused)
    }
    ibv_qp_attr a = {};
    a.qp_state    = IBV_QPS_ERR;
    int ret       = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    if (ret != 0) {
        ucs_warn("qp 0x%x: modify to ERR failed: %s", qp->qp_num, strerror(ret));
    }
}

void flush_receives(ibv_qp *qp, ucs_time_t *last, ucs_time_t interval)
{
    const ucs_time_t now = ucs_get_time();
    if (now - *last >= interval) {
        *last = now;
        qp_to_error(qp);
    }
}

const char *wc_status_str(ibv_wc_status status)
{
    return ibv_wc_status_str(status);
}

ucs_status_t status_from_wc(ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_SUCCESS:
        return UCS_OK;
    case IBV_WC_WR_FLUSH_ERR:
        return UCS_ERR_CANCELED;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR:
        return UCS_ERR_INVALID_ADDR;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_LEN_ERR:
        return UCS_ERR_MESSAGE_TRUNCATED;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

} // namespace zv::verbs
