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
           (out->type >= conn_msg::req) && (out->type <= conn_msg::done);
}

bool grh_source_matches(const char *grh, const uint8_t gid[16])
{
    const auto *g = reinterpret_cast<const uint8_t *>(grh);
    if ((g[0] >> 4) == 6) {
        return std::memcmp(g + 8, gid, 16) == 0;
    }
    if ((g[20] >> 4) == 4) {
        static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return (std::memcmp(gid, v4_mapped, sizeof(v4_mapped)) == 0) &&
               (std::memcmp(g + 32, gid + 12, 4) == 0);
    }
    return true;
}

} // namespace zv::iface
