// SPDX-License-Identifier: BSD-3-Clause
// Logging for the cache and the monitors (and any layer beside them): UCX's
// public logger under a cap that the C API sets, one include to change.
#ifndef ZV_UTIL_LOG_H_
#define ZV_UTIL_LOG_H_

#include <ucs/debug/log_def.h>

#include <atomic>

namespace zv {
// Most verbose level (ucs_log_level_t) the cache and monitors log at, on top
// of UCX's own UCX_LOG_LEVEL. UCS_LOG_LEVEL_LAST (the default, the UCT
// module) leaves it all to UCX; libzverbs lowers it from ZVERBS_LOG_LEVEL
// (default: nothing), because a library returns its errors instead.
extern std::atomic<int> g_log_cap;
} // namespace zv

#define zv_log_at(_level, ...)                                                        \
    do {                                                                              \
        if (static_cast<int>(_level) <= zv::g_log_cap.load(std::memory_order_relaxed)) { \
            ucs_log(_level, __VA_ARGS__);                                             \
        }                                                                             \
    } while (0)

#define zv_log_error(...) zv_log_at(UCS_LOG_LEVEL_ERROR, __VA_ARGS__)
#define zv_log_warn(...)  zv_log_at(UCS_LOG_LEVEL_WARN, __VA_ARGS__)
#define zv_log_diag(...)  zv_log_at(UCS_LOG_LEVEL_DIAG, __VA_ARGS__)
#define zv_log_debug(...) zv_log_at(UCS_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define zv_log_trace(...) zv_log_at(UCS_LOG_LEVEL_TRACE, __VA_ARGS__)

#endif
