// SPDX-License-Identifier: BSD-3-Clause
// rc_zv endpoint operations: active messages, RMA, atomics.
#include "rc/rc_ep_inl.h"

#include "iface/check.h"

namespace zv::rc {

namespace {
/// Short sends go inline: the 8-byte AM header and the payload together
/// fit what the device granted (iface_query's max_short, which counts the
/// header as UCT's does).
constexpr size_t short_hdr = sizeof(uint64_t);
} // namespace

// ---------------------------------------------------------------- AM

ucs_status_t am_short(uct_ep_h uct_ep, uint8_t id, uint64_t header,
                      const void *payload, unsigned length)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_short", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "am_short", "header + payload",
                                     short_hdr + length, ep->iface->max_inline);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(&header), sizeof(header), 0},
                      {reinterpret_cast<uintptr_t>(payload), length, 0}};
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = sge;
    wr.num_sge     = (length > 0) ? 2 : 1;
    return post(ep, &wr, nullptr, false);
}

ucs_status_t am_short_iov(uct_ep_h uct_ep, uint8_t id, const uct_iov_t *iov,
                          size_t iovcnt)
{
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_short_iov", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_iovcnt(&ep->iface->super, "am_short_iov", iovcnt, 4);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        // (max_short: what iface_query promises; no header of its own)
        status = iface::check_length(&ep->iface->super, "am_short_iov", "payload",
                                     iface::iov_total(iov, iovcnt), ep->iface->max_inline);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge[4];
    size_t total = 0;
    fill_sge_iov(sge, iov, iovcnt, &total);
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = sge;
    wr.num_sge     = static_cast<int>(iovcnt);
    return post(ep, &wr, nullptr, false);
}

ssize_t am_bcopy(uct_ep_h uct_ep, uint8_t id, uct_pack_callback_t pack_cb,
                 void *arg, unsigned flags)
{
    rc_ep *ep           = to_ep(uct_ep);
    iface::buffer *b;
    char *data;
    tx_op *op;
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_bcopy", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = start_bounced(ep, &b, &data, &op);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    size_t length   = pack_cb(data, arg);
    ibv_send_wr &wr = ep->wr;
    wr.opcode       = IBV_WR_SEND_WITH_IMM;
    wr.imm_data     = am_imm(id);
    wr.send_flags   = (length <= ep->iface->max_inline) ? IBV_SEND_INLINE : 0;
    return post_bounced(ep, &wr, b, data, op, length, false);
}

ucs_status_t am_zcopy(uct_ep_h uct_ep, uint8_t id, const void *header,
                      unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                      unsigned flags, uct_completion_t *comp)
{
    rc_ep *ep       = to_ep(uct_ep);
    rc_iface *iface = ep->iface;
    // What iface_query advertises: a larger message would overrun the
    // peer's receive buffer and end the connection (both sides' QPs).
    ucs_status_t status = iface::check_am_id(&ep->iface->super, "am_zcopy", id);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "am_zcopy", "header", header_length,
                                     am_zcopy_max_hdr);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_iovcnt(&ep->iface->super, "am_zcopy", iovcnt, am_zcopy_max_iov);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "am_zcopy", "header + payload",
                                     header_length + iface::iov_total(iov, iovcnt),
                                     iface->settings.seg_size);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge[am_zcopy_max_iov + 1];
    int nsge  = 0;
    tx_op *op = nullptr;
    if (header_length > 0) {
        iface::buffer *b;
        char *data;
        status = start_bounced(ep, &b, &data, &op); // out of buffers: tx_starve()
        if (__builtin_expect(status != UCS_OK, 0)) {
            return status;
        }
        std::memcpy(data, header, header_length);
        sge[nsge++] = {reinterpret_cast<uintptr_t>(data), header_length, b->lkey};
    } else {
        op = op_get(iface);
        if (__builtin_expect(op == nullptr, 0)) {
            return UCS_ERR_NO_RESOURCE;
        }
    }
    size_t total = header_length;
    fill_sge_iov(&sge[nsge], iov, iovcnt, &total);
    nsge += static_cast<int>(iovcnt);
    op->comp       = comp;
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_SEND_WITH_IMM;
    wr.imm_data    = am_imm(id);
    wr.send_flags  = 0;
    wr.sg_list     = sge;
    wr.num_sge     = nsge;
    status = post(ep, &wr, op, comp != nullptr);
    if (status != UCS_OK) {
        op->comp = nullptr;
        retire_op(iface, op, status);
        return status;
    }
    return UCS_INPROGRESS;
}

// ---------------------------------------------------------------- RMA

ucs_status_t put_short(uct_ep_h uct_ep, const void *buffer, unsigned length,
                       uint64_t remote_addr, uct_rkey_t rkey)
{
    rc_ep *ep = to_ep(uct_ep);
    // An inline write longer than the device granted fails its post.
    ucs_status_t status = iface::check_length(&ep->iface->super, "put_short", "payload", length,
                                              ep->iface->max_inline);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    ibv_sge sge    = {reinterpret_cast<uintptr_t>(buffer), length, 0};
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = IBV_WR_RDMA_WRITE;
    wr.send_flags  = IBV_SEND_INLINE;
    wr.sg_list     = &sge;
    wr.num_sge     = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    return post(ep, &wr, nullptr, false);
}

ucs_status_t ep_check(uct_ep_h uct_ep, unsigned flags, uct_completion_t *comp)
{
    if ((flags != 0) || (comp != nullptr)) {
        ucs_error("rc_zv: ep_check: flags 0x%x and a completion are not supported", flags);
        return UCS_ERR_INVALID_PARAM;
    }
    rc_ep *ep           = to_ep(uct_ep);
    ucs_status_t status = check_tx(ep); // (no room: UCP checks again later)
    if (status != UCS_OK) {
        return status;
    }
    // A zero-length RDMA WRITE: the peer's device answers it whether or not
    // its process progresses; with the peer gone, the retries run out and
    // the endpoint fails as on any send.
    ibv_send_wr &wr        = ep->wr;
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.sg_list             = nullptr;
    wr.num_sge             = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey        = 0;
    return post(ep, &wr, nullptr, false);
}

ssize_t put_bcopy(uct_ep_h uct_ep, uct_pack_callback_t pack_cb, void *arg,
                  uint64_t remote_addr, uct_rkey_t rkey)
{
    rc_ep *ep           = to_ep(uct_ep);
    iface::buffer *b;
    char *data;
    tx_op *op;
    ucs_status_t status = start_bounced(ep, &b, &data, &op);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    size_t length          = pack_cb(data, arg);
    ibv_send_wr &wr         = ep->wr;
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    return post_bounced(ep, &wr, b, data, op, length, false);
}

namespace {

ucs_status_t rdma_zcopy(rc_ep *ep, ibv_wr_opcode opcode, const uct_iov_t *iov,
                        size_t iovcnt, uint64_t remote_addr, uct_rkey_t rkey,
                        uct_completion_t *comp)
{
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    if (iovcnt > 4) {
        return UCS_ERR_INVALID_PARAM;
    }
    tx_op *op = nullptr;
    if (comp != nullptr) {
        op = op_get(ep->iface);
        if (op == nullptr) {
            return UCS_ERR_NO_RESOURCE;
        }
        op->comp = comp;
    }
    ibv_sge sge[4];
    size_t total = 0;
    fill_sge_iov(sge, iov, iovcnt, &total);
    ibv_send_wr &wr = ep->wr;
    wr.opcode      = opcode;
    wr.send_flags  = 0;
    wr.sg_list     = sge;
    wr.num_sge     = static_cast<int>(iovcnt);
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    status = post(ep, &wr, op, comp != nullptr);
    if (status != UCS_OK) {
        if (op != nullptr) {
            op->comp = nullptr;
            retire_op(ep->iface, op, status);
        }
        return status;
    }
    return UCS_INPROGRESS;
}

} // namespace

ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return rdma_zcopy(to_ep(ep), IBV_WR_RDMA_WRITE, iov, iovcnt, remote_addr, rkey,
                      comp);
}

ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return rdma_zcopy(to_ep(ep), IBV_WR_RDMA_READ, iov, iovcnt, remote_addr, rkey,
                      comp);
}

ucs_status_t get_bcopy(uct_ep_h uct_ep, uct_unpack_callback_t unpack_cb, void *arg,
                       size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                       uct_completion_t *comp)
{
    rc_ep *ep           = to_ep(uct_ep);
    if (length > ep->iface->tx_pool.payload()) {
        return UCS_ERR_INVALID_PARAM;
    }
    iface::buffer *b;
    char *data;
    tx_op *op;
    ucs_status_t status = start_bounced(ep, &b, &data, &op);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    op->type               = tx_op::get_bcopy;
    op->unpack             = unpack_cb;
    op->arg                = arg;
    op->length             = static_cast<uint32_t>(length);
    op->comp               = comp;
    ibv_send_wr &wr         = ep->wr;
    wr.opcode              = IBV_WR_RDMA_READ;
    wr.send_flags          = 0;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = static_cast<uint32_t>(rkey);
    ssize_t ret            = post_bounced(ep, &wr, b, data, op, length, true);
    return (ret < 0) ? static_cast<ucs_status_t>(ret) : UCS_INPROGRESS;
}

// ---------------------------------------------------------------- atomics

namespace {

ucs_status_t post_atomic(rc_ep *ep, ibv_wr_opcode opcode, uint64_t compare_add,
                         uint64_t swap, uint64_t remote_addr, uct_rkey_t rkey,
                         uint64_t *result, uct_completion_t *comp)
{
    iface::buffer *b;
    char *data;
    tx_op *op;
    ucs_status_t status = start_bounced(ep, &b, &data, &op);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    if (result != nullptr) {
        op->type   = tx_op::atomic_fetch;
        op->result = result;
        op->comp   = comp;
    }
    ibv_send_wr &wr           = ep->wr;
    wr.opcode                = opcode;
    wr.send_flags            = 0;
    wr.wr.atomic.remote_addr = remote_addr;
    wr.wr.atomic.rkey        = static_cast<uint32_t>(rkey);
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap        = swap;
    ssize_t ret = post_bounced(ep, &wr, b, data, op, sizeof(uint64_t),
                               result != nullptr);
    if (ret < 0) {
        return static_cast<ucs_status_t>(ret);
    }
    return (result != nullptr) ? UCS_INPROGRESS : UCS_OK;
}

} // namespace

ucs_status_t atomic64_post(uct_ep_h ep, unsigned opcode, uint64_t value,
                           uint64_t remote_addr, uct_rkey_t rkey)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0, remote_addr,
                       rkey, nullptr, nullptr);
}

ucs_status_t atomic64_fetch(uct_ep_h ep, unsigned opcode, uint64_t value,
                            uint64_t *result, uint64_t remote_addr, uct_rkey_t rkey,
                            uct_completion_t *comp)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0, remote_addr,
                       rkey, result, comp);
}

ucs_status_t atomic_cswap64(uct_ep_h ep, uint64_t compare, uint64_t swap,
                            uint64_t remote_addr, uct_rkey_t rkey, uint64_t *result,
                            uct_completion_t *comp)
{
    return post_atomic(to_ep(ep), IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap,
                       remote_addr, rkey, result, comp);
}
} // namespace zv::rc
