// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: rc_zv's AM immediate data, zv::rc::decode_am. The input is a
// sequence of 32-bit immediates as a peer's SEND_WITH_IMM carries them.
#include "rc/rc_wire.h"

#include "fuzz_common.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    for (size_t off = 0; off + sizeof(uint32_t) <= size; off += sizeof(uint32_t)) {
        uint32_t imm;
        std::memcpy(&imm, data + off, sizeof(imm));
        uint8_t am_id = 0xff;
        if (zv::rc::decode_am(imm, &am_id)) {
            // Accepted: a valid id (it indexes UCT's handler table), and the
            // only encoding of it a sender produces.
            ZV_FUZZ_CHECK(am_id < UCT_AM_ID_MAX);
            ZV_FUZZ_CHECK(imm == zv::rc::am_imm(am_id));
        } else {
            // Refused: not something a well-behaved sender produces.
            ZV_FUZZ_CHECK((ntohl(imm) >= UCT_AM_ID_MAX));
        }
    }
    return 0;
}
