// SPDX-License-Identifier: BSD-3-Clause
// ud_zv's wire format beyond the core's header (src/rd/rd_wire.h): the
// bodies of its in-band handshake and liveness packets, and the validation
// of a received datagram.
#ifndef ZV_UD_UD_WIRE_H
#define ZV_UD_UD_WIRE_H

#include "iface/zv_iface.h" // device_addr
#include "rd/rd_wire.h"

namespace zv::ud {

using rd::parsed_pkt;
using rd::rd_hdr;

/// CREQ payload: who is asking, and where to answer.
struct __attribute__((packed)) creq_body {
    uint32_t           ep_id;
    iface::device_addr dev;
};

/// CREP payload: the receive connection that now exists for the endpoint
/// (also REBIND's: the receive connection it is now).
struct __attribute__((packed)) crep_body {
    uint32_t conn_id;
};

/// DISC payload: the endpoint that is going away (also ALIVE's: the
/// endpoint that answers).
struct __attribute__((packed)) disc_body {
    uint32_t ep_id;
};

/// PROBE payload: the receive connection that asks.
struct __attribute__((packed)) probe_body {
    uint32_t conn_id;
};

/// The GRH in front of every datagram a UD QP receives.
constexpr size_t grh_len = 40;

/// The control packets ud_zv carries and the body each needs (rd::parse_hdr).
struct wire {
    static constexpr bool body_fits(uint8_t type, size_t body_len)
    {
        switch (type) {
        case rd_hdr::creq:
            return body_len >= sizeof(creq_body);
        case rd_hdr::crep:
        case rd_hdr::rebind:
            return body_len >= sizeof(crep_body);
        case rd_hdr::disc:
        case rd_hdr::alive:
            return body_len >= sizeof(disc_body);
        case rd_hdr::probe:
            return body_len >= sizeof(probe_body);
        default:
            return false;
        }
    }
    /// The largest of those bodies.
    static constexpr size_t max_body = sizeof(creq_body);
};

/// Validate a packet (rd_hdr first) of ud_zv's: rd::parse_hdr with its bodies.
[[nodiscard, gnu::always_inline]] inline bool parse_hdr(const char *pkt, size_t len,
                                                        parsed_pkt *out)
{
    return rd::parse_hdr<wire>(pkt, len, out);
}

/// Validate a received datagram: the GRH, then the packet (parse_hdr).
[[nodiscard]] inline bool parse_packet(const char *pkt, size_t len, parsed_pkt *out)
{
    return (len >= grh_len) && parse_hdr(pkt + grh_len, len - grh_len, out);
}

} // namespace zv::ud

#endif
