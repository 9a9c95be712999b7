// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the receive-side validation of ud_zv and uc_zv
// (src/rd/rd_wire.h, src/ud/ud_wire.h, src/uc/uc_wire.h): parse_packet, a
// datagram as the UD QP hands it over (40-byte GRH, rd_hdr, body), and
// parse_hdr, the same without GRH (rd::parse_hdr, as a SEND on a uc_zv queue
// pair goes through it). Every input goes through both; its first four
// bytes are also a uc_zv put's immediate data (decode_put_imm).
#include "uc/uc_wire.h"
#include "ud/ud_iface.h"

#include "fuzz_common.h"

#include <cstring>

using namespace zv::ud;
using namespace zv::uc;

namespace {

/// 'p' was accepted from [pkt, pkt + size) whose header starts at 'hdr_off'.
void check_accepted(const char *pkt, size_t size, size_t hdr_off, const parsed_pkt &p)
{
    // The header and the body lie inside the packet...
    ZV_FUZZ_CHECK(size >= hdr_off + sizeof(rd_hdr));
    ZV_FUZZ_CHECK(p.body == pkt + hdr_off + sizeof(rd_hdr));
    ZV_FUZZ_CHECK(p.body_len == size - hdr_off - sizeof(rd_hdr));
    // The header as sent, but for the ack-request flag (DATA's only),
    // which parsing moves out of 'type'.
    rd_hdr raw;
    std::memcpy(&raw, pkt + hdr_off, sizeof(raw));
    ZV_FUZZ_CHECK(p.ack_req == ((raw.type & rd_hdr::flag_ack_req) != 0));
    ZV_FUZZ_CHECK(!p.ack_req || (p.hdr.type == rd_hdr::data));
    raw.type &= static_cast<uint8_t>(~rd_hdr::flag_ack_req);
    ZV_FUZZ_CHECK(std::memcmp(&p.hdr, &raw, sizeof(rd_hdr)) == 0);
    ZV_FUZZ_CHECK(p.hdr.magic == rd_hdr::magic_value);
    (void)zv::fuzz::read_all(p.body, p.body_len);
    // ...and every field the receive path then reads without further checks
    // is in range: the AM id indexes UCT's handler table, the bodies are
    // copied out whole (ud_rx.cc: handle_creq, handle_from_ep; rd_ep.cc:
    // ep_packet; ud_reclaim.cc: answer_probe; uc.cc: rx_packet).
    switch (p.hdr.type) {
    case rd_hdr::data:
        ZV_FUZZ_CHECK(p.hdr.am_id < UCT_AM_ID_MAX);
        break;
    case rd_hdr::ack:
    case rd_hdr::nak:
    case rd_hdr::ack_req:
        break;
    case rd_hdr::creq: {
        creq_body b;
        ZV_FUZZ_CHECK(p.body_len >= sizeof(b));
        std::memcpy(&b, p.body, sizeof(b));
        break;
    }
    case rd_hdr::crep:
    case rd_hdr::rebind: {
        crep_body b;
        ZV_FUZZ_CHECK(p.body_len >= sizeof(b));
        std::memcpy(&b, p.body, sizeof(b));
        break;
    }
    case rd_hdr::disc:
    case rd_hdr::alive: {
        disc_body b;
        ZV_FUZZ_CHECK(p.body_len >= sizeof(b));
        std::memcpy(&b, p.body, sizeof(b));
        break;
    }
    case rd_hdr::probe: {
        probe_body b;
        ZV_FUZZ_CHECK(p.body_len >= sizeof(b));
        std::memcpy(&b, p.body, sizeof(b));
        break;
    }
    default:
        ZV_FUZZ_CHECK(!"an unknown packet type was accepted");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    // libFuzzer's buffer is exactly 'size' bytes on the heap: any read past
    // it is reported by ASAN.
    const char *pkt = reinterpret_cast<const char *>(data);
    parsed_pkt  p;
    if (parse_packet(pkt, size, &p)) {
        check_accepted(pkt, size, grh_len, p);
    }
    if (parse_hdr(pkt, size, &p)) {
        check_accepted(pkt, size, 0, p);
    }
    if (size >= sizeof(uint32_t)) {
        uint32_t imm;
        uint16_t psn = 0;
        std::memcpy(&imm, data, sizeof(imm));
        bool ack_req;
        if (decode_put_imm(imm, &psn, &ack_req)) {
            // Accepted: exactly what a sender's put_imm(psn, ack_req) carries.
            ZV_FUZZ_CHECK(__builtin_bswap32(put_imm(psn, ack_req)) == imm);
        } else {
            // Refused: put_imm never produces it.
            ZV_FUZZ_CHECK(!(imm & put_imm_flag) || (imm & 0x3fff0000u) != 0);
        }
    }
    return 0;
}
