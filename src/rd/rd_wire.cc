// SPDX-License-Identifier: BSD-3-Clause
// Packet validation of the reliable-datagram core: no state, no device
// (fuzzed natively, test/fuzz).
#include "rd/rd_iface.h"

#include <cstring>

namespace zv::rd {

bool parse_hdr(const char *pkt, size_t len, parsed_pkt *out)
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
    case rd_hdr::creq:
        return out->body_len >= sizeof(creq_body);
    case rd_hdr::crep:
    case rd_hdr::rebind:
        return out->body_len >= sizeof(crep_body);
    case rd_hdr::disc:
    case rd_hdr::alive:
        return out->body_len >= sizeof(disc_body);
    case rd_hdr::probe:
        return out->body_len >= sizeof(probe_body);
    default:
        return false;
    }
}

} // namespace zv::rd
