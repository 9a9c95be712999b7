// SPDX-License-Identifier: BSD-3-Clause
// uc_zv's wire format beyond the core's header (src/rd/rd_wire.h): a put's
// immediate data, and the validation of a received SEND.
#ifndef ZV_UC_UC_WIRE_H
#define ZV_UC_UC_WIRE_H

#include "rd/rd_wire.h"

#include <cstdint>

namespace zv::uc {

/*
 * A put is an RDMA WRITE with immediate data: the immediate is a marker
 * bit, an ack-request bit and the psn, and the receive completion of the
 * write is the packet (it exists only for a write that arrived whole).
 */
constexpr uint32_t put_imm_flag    = 0x80000000u;
constexpr uint32_t put_imm_ack_req = 0x40000000u;
/// A put's immediate data (network order, as ibv_send_wr::imm_data).
inline uint32_t put_imm(uint16_t psn, bool ack_req)
{
    return __builtin_bswap32(put_imm_flag | (ack_req ? put_imm_ack_req : 0) | psn);
}
/// The receive side of put_imm: 'host_imm' is ntohl(wc.imm_data). True, with
/// the psn and the ack request, only for what put_imm produces (the marker
/// bit, no other bits).
[[nodiscard]] inline bool decode_put_imm(uint32_t host_imm, uint16_t *psn, bool *ack_req)
{
    if (((host_imm & ~(put_imm_flag | put_imm_ack_req | 0xffffu)) != 0) ||
        !(host_imm & put_imm_flag)) {
        return false;
    }
    *psn     = static_cast<uint16_t>(host_imm);
    *ack_req = (host_imm & put_imm_ack_req) != 0;
    return true;
}

/// uc_zv carries no control packet with a body: its connections are the
/// connection manager's (rd::parse_hdr refuses CREQ, CREP, DISC, ...).
struct wire {
    static constexpr bool body_fits(uint8_t, size_t) { return false; }
    static constexpr size_t max_body = 0;
};

/// Validate a received SEND (rd_hdr first).
[[nodiscard, gnu::always_inline]] inline bool parse_send(const char *pkt, size_t len,
                                                         rd::parsed_pkt *out)
{
    return rd::parse_hdr<wire>(pkt, len, out);
}

} // namespace zv::uc

#endif
