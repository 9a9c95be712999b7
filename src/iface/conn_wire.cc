// SPDX-License-Identifier: BSD-3-Clause
// Connection message validation: no state, no device (fuzzed natively, test/fuzz).
#include "iface/conn.h"

#include <cstring>

namespace zv::iface {

bool parse_conn_msg(const char *buf, size_t len, ibv_qp_type transport, conn_msg *out)
{
    if (len < sizeof(conn_msg)) {
        return false;
    }
    std::memcpy(out, buf, sizeof(conn_msg));
    return (out->magic == conn_msg::magic_value) &&
           (out->transport == static_cast<uint8_t>(transport)) &&
           ((out->type == conn_msg::req) || (out->type == conn_msg::rep) ||
            (out->type == conn_msg::disc));
}

} // namespace zv::iface
