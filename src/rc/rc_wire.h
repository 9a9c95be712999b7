// SPDX-License-Identifier: BSD-3-Clause
// rc_zv wire format: the immediate data that carries an AM id (no state, no
// device; the decoder is fuzzed natively, test/fuzz).
#ifndef ZV_RC_RC_WIRE_H
#define ZV_RC_RC_WIRE_H

#include <uct/api/uct_def.h>

#include <arpa/inet.h>
#include <cstdint>

namespace zv::rc {

// Immediate data of an AM: [version:8 | reserved:16 | am_id:8].
inline uint32_t am_imm(uint8_t am_id) { return htonl(am_id); }

/// A peer's immediate data: true and *am_id set when it names a valid AM id
/// in version 0; false for anything else (the message is dropped).
inline bool decode_am(uint32_t imm_be, uint8_t *am_id)
{
    uint32_t imm = ntohl(imm_be);
    *am_id       = static_cast<uint8_t>(imm & 0xff);
    return ((imm >> 8) == 0) && (*am_id < UCT_AM_ID_MAX);
}

} // namespace zv::rc

#endif
