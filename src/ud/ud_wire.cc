// SPDX-License-Identifier: BSD-3-Clause
// ud_zv/uc_zv packet validation: no state, no device (fuzzed natively, test/fuzz).
#include "ud/ud_iface.h"

#include <cstring>

namespace zv::ud {

bool parse_packet(const char *pkt, size_t len, parsed_pkt *out)
{
    return (len >= grh_len) && parse_hdr(pkt + grh_len, len - grh_len, out);
}

bool parse_hdr(const char *pkt, size_t len, parsed_pkt *out)
{
    if (len < sizeof(ud_hdr)) {
        return false;
    }
    std::memcpy(&out->hdr, pkt, sizeof(ud_hdr));
    out->body     = pkt + sizeof(ud_hdr);
    out->body_len = len - sizeof(ud_hdr);
    if (out->hdr.magic != ud_hdr::magic_value) {
        return false;
    }
    switch (out->hdr.type) {
    case ud_hdr::data:
        return out->hdr.am_id < UCT_AM_ID_MAX;
    case ud_hdr::ack:
    case ud_hdr::nak:
        return true;
    case ud_hdr::creq:
        return out->body_len >= sizeof(creq_body);
    case ud_hdr::crep:
    case ud_hdr::rebind:
        return out->body_len >= sizeof(crep_body);
    case ud_hdr::disc:
    case ud_hdr::alive:
        return out->body_len >= sizeof(disc_body);
    case ud_hdr::probe:
        return out->body_len >= sizeof(probe_body);
    default:
        return false;
    }
}

} // namespace zv::ud
