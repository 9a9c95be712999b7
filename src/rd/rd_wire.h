// SPDX-License-Identifier: BSD-3-Clause
// The reliable-datagram core's wire format: the header every ud_zv and
// uc_zv packet starts with, the interface address, and the header's
// validation. The bodies of the control packets are the transports'
// (src/ud/ud_wire.h); a put's immediate data is uc_zv's (src/uc/uc_wire.h).
#ifndef ZV_RD_RD_WIRE_H
#define ZV_RD_RD_WIRE_H

#include <uct/api/uct_def.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace zv::rd {

/*
 * Every packet starts with rd_hdr; 'dest' names the object it is for at
 * the receiver (DATA, CREQ, DISC, ACK_REQ: a receive connection; ACK, NAK,
 * CREP: an endpoint). Ids are 32 bits: a table index in the low 20 bits
 * and a generation in the high 12, so a packet for an object that was
 * freed (and its slot reused) is recognised and dropped. Every field of a
 * received header is checked before use.
 *
 * The types are one numbering for both transports. DATA, ACK, NAK and
 * ACK_REQ are the core's; the others are control packets of a transport
 * that sets its connections up in band (ud_zv), whose bodies it defines
 * and checks (parse_hdr's 'Wire').
 */

/// On-wire header of every packet of ud_zv and uc_zv (little-endian hosts).
struct __attribute__((packed)) rd_hdr {
    static constexpr uint16_t magic_value = 0x5a55; // "ZU"
    enum : uint8_t {
        data = 1, ack = 2, nak = 3, creq = 4, crep = 5, disc = 6,
        probe = 7, ///< to an endpoint: do you still exist?
        alive = 8, ///< the answer, to its receive connection
        /// to an endpoint whose receive connection was reclaimed and is
        /// back under a new id (in the body); ack_psn: the last psn delivered
        rebind = 9,
        /// to a receive connection: acknowledge now (a flush waits for the window)
        ack_req = 10
    };
    /// In 'type' of a DATA packet: acknowledge it now (its sender waits
    /// for the ack: a completion, a full window).
    static constexpr uint8_t flag_ack_req = 0x80;

    uint32_t dest;     ///< id of the receiving object (see above)
    uint32_t ack_dest; ///< DATA: endpoint id a piggybacked ack is for (0: none)
    uint16_t psn;      ///< DATA, CREQ: sequence number
    uint16_t ack_psn;  ///< ACK, NAK, CREP, piggyback: last psn delivered
    uint8_t  type;
    uint8_t  am_id;    ///< DATA
    uint16_t magic;
};

/// Interface address of both transports: the QP number the peer's
/// endpoints address first (ud_zv: its UD QP; uc_zv: its connection
/// manager's).
struct __attribute__((packed)) iface_addr {
    uint8_t qpn[3];
};

/// A received packet whose header passed the checks that need no state.
struct parsed_pkt {
    rd_hdr      hdr;      ///< type without flag_ack_req
    const char *body;
    size_t      body_len;
    bool        ack_req;  ///< DATA: the sender asks for the ack now
};

/// Validate a received packet (rd_hdr first): length, magic, known type,
/// AM id, and for a control packet the body length its type needs, which
/// 'Wire' (the transport's) says: `static constexpr bool
/// body_fits(uint8_t type, size_t body_len)`, false for a type it does not
/// carry. No state is touched; the caller still checks that ids name live
/// objects of the sending QP. (Inline: the header stays in registers on the
/// receive path. Fuzzed natively, test/fuzz.)
template <class Wire>
[[nodiscard, gnu::always_inline]] inline bool parse_hdr(const char *pkt, size_t len,
                                                        parsed_pkt *out)
{
    if (len < sizeof(rd_hdr)) {
        return false;
    }
    std::memcpy(&out->hdr, pkt, sizeof(rd_hdr));
    out->body     = pkt + sizeof(rd_hdr);
    out->body_len = len - sizeof(rd_hdr);
    if (out->hdr.magic != rd_hdr::magic_value) {
        return false;
    }
    out->ack_req = (out->hdr.type & rd_hdr::flag_ack_req) != 0;
    out->hdr.type &= static_cast<uint8_t>(~rd_hdr::flag_ack_req);
    if (out->ack_req && (out->hdr.type != rd_hdr::data)) {
        return false; // the flag is DATA's
    }
    switch (out->hdr.type) {
    case rd_hdr::data:
        return out->hdr.am_id < UCT_AM_ID_MAX;
    case rd_hdr::ack:
    case rd_hdr::nak:
    case rd_hdr::ack_req:
        return true;
    default:
        return Wire::body_fits(out->hdr.type, out->body_len);
    }
}

} // namespace zv::rd

#endif
