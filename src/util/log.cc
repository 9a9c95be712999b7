// SPDX-License-Identifier: BSD-3-Clause
#include "util/log.h"

namespace zv {
std::atomic<int> g_log_cap{UCS_LOG_LEVEL_LAST};
} // namespace zv
