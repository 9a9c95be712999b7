// SPDX-License-Identifier: BSD-3-Clause
// libzverbs only (not the UCT module, not the unit tests): the log knob, read when the library loads.
#include "capi/zverbs_internal.h"

#include <cstdlib>

namespace {
// Quiet unless ZVERBS_LOG_LEVEL asks: a library returns its errors.
const bool g_log_level_set = zv::capi::set_log_level(std::getenv("ZVERBS_LOG_LEVEL"));
} // namespace
