// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the connection handshake of rc_zv/uc_zv,
// zv::iface::parse_conn_msg. The first input byte picks the transport the
// receiving interface serves (rc_zv: RC, uc_zv: UC, the only ones that run a
// connection manager); the rest is the message after the GRH.
#include "iface/conn.h"

#include "fuzz_common.h"

#include <cstring>

using namespace zv::iface;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    const ibv_qp_type transport = (data[0] & 1) ? IBV_QPT_UC : IBV_QPT_RC;
    const char       *buf       = reinterpret_cast<const char *>(data + 1);
    const size_t      len       = size - 1;
    conn_msg          msg;
    if (!parse_conn_msg(buf, len, transport, &msg)) {
        return 0;
    }
    ZV_FUZZ_CHECK(len >= sizeof(conn_msg));
    ZV_FUZZ_CHECK(std::memcmp(&msg, buf, sizeof(msg)) == 0);
    ZV_FUZZ_CHECK(msg.magic == conn_msg::magic_value);
    ZV_FUZZ_CHECK(msg.transport == static_cast<uint8_t>(transport));
    ZV_FUZZ_CHECK((msg.type == conn_msg::req) || (msg.type == conn_msg::rep) ||
                  (msg.type == conn_msg::disc) || (msg.type == conn_msg::ack) ||
                  (msg.type == conn_msg::done));
    return 0;
}
