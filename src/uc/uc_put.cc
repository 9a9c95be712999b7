// SPDX-License-Identifier: BSD-3-Clause
// uc_zv puts: RDMA WRITE with immediate data under the reliability of
// src/rd/rel.h (see uc.cc; the immediate's encoding is uc_wire.h's).
#include "uc/uc_iface.h"

#include "iface/check.h"
#include "rd/rd_send.h"

#include <cstring>

namespace zv::uc {

namespace {

/// A put: RDMA WRITE with immediate data, acknowledged like any packet.
/// 'copy': bytes the caller will copy into the descriptor's buffer.
inline tx_desc *put_desc(rd_ep *ep, size_t length, size_t copy, uint64_t remote_addr,
                         uct_rkey_t rkey)
{
    if (__builtin_expect(length > to_uc(ep->iface)->settings.max_write, 0)) {
        return nullptr;
    }
    tx_desc *d = desc_get(ep, rd_hdr::data, copy);
    if (__builtin_expect(d == nullptr, 0)) {
        return nullptr;
    }
    d->opcode                  = IBV_WR_RDMA_WRITE_WITH_IMM;
    d->target.rdma.remote_addr = remote_addr;
    d->target.rdma.rkey        = static_cast<uint32_t>(rkey);
    d->num_sge                 = 0;
    return d;
}

/// Number the put, keep it, post it (rd::send_desc() for a put): its psn
/// and ack request travel as its immediate data (uc_wire.h).
inline void send_put(rd_ep *ep, tx_desc *d)
{
    number_desc(ep, d);
    const rd_hdr *h = d->hdr();
    d->imm_data     = put_imm(h->psn, (h->type & rd_hdr::flag_ack_req) != 0);
    post_numbered(ep, d);
}

} // namespace

ucs_status_t ep_put_short(uct_ep_h uct_ep, const void *buffer, unsigned length,
                          uint64_t remote_addr, uct_rkey_t rkey)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    ucs_status_t status = iface::check_length(&ep->iface->super, "put_short", "payload", length,
                                              to_uc(ep->iface)->settings.max_write);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = put_desc(ep, length, length, remote_addr, rkey);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    std::memcpy(d->payload(), buffer, length);
    d->sge[d->num_sge++] = {reinterpret_cast<uintptr_t>(d->payload()), length, d->buf->lkey};
    send_put(ep, d);
    return UCS_OK;
}

ssize_t ep_put_bcopy(uct_ep_h uct_ep, uct_pack_callback_t pack_cb, void *arg,
                     uint64_t remote_addr, uct_rkey_t rkey)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    ucs_status_t status = check_tx(ep);
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = put_desc(ep, 0, to_uc(ep->iface)->settings.max_write, remote_addr, rkey);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    size_t length = pack_cb(d->payload(), arg);
    if (__builtin_expect(length > to_uc(ep->iface)->settings.max_write, 0)) {
        ucs_error("uc_zv: put_bcopy packed %zu bytes, more than the %u allowed", length,
                  to_uc(ep->iface)->settings.max_write);
        iface::buffer_pool::put(d->buf);
        return UCS_ERR_INVALID_PARAM;
    }
    d->sge[d->num_sge++] = {reinterpret_cast<uintptr_t>(d->payload()),
                            static_cast<uint32_t>(length), d->buf->lkey};
    send_put(ep, d);
    return static_cast<ssize_t>(length);
}

ucs_status_t ep_put_zcopy(uct_ep_h uct_ep, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    rd_ep *ep           = to_ep(uct_ep);
    worker_scope scope(&ep->iface->as.gate);
    const size_t total  = iface::iov_total(iov, iovcnt);
    ucs_status_t status = iface::check_iovcnt(&ep->iface->super, "put_zcopy", iovcnt, max_sge);
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = iface::check_length(&ep->iface->super, "put_zcopy", "payload", total,
                                     to_uc(ep->iface)->settings.max_write);
    }
    if (__builtin_expect(status == UCS_OK, 1)) {
        status = check_tx(ep);
    }
    if (__builtin_expect(status != UCS_OK, 0)) {
        return status;
    }
    tx_desc *d = put_desc(ep, total, 0, remote_addr, rkey);
    if (__builtin_expect(d == nullptr, 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (__builtin_expect(!add_iov(d, iov, iovcnt), 0)) {
        iface::buffer_pool::put(d->buf);
        return UCS_ERR_INVALID_PARAM;
    }
    d->comp = comp;
    ++ep->iface->tx_put_zcopy;
    send_put(ep, d);
    return UCS_INPROGRESS;
}

} // namespace zv::uc
