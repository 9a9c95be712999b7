// SPDX-License-Identifier: BSD-3-Clause
// Logging for the cache and monitors: UCX's public logger, one include to change.
#ifndef ZV_RCACHE_LOG_H_
#define ZV_RCACHE_LOG_H_

#include <ucs/debug/log_def.h>

#define zv_log_error(...) ucs_error(__VA_ARGS__)
#define zv_log_warn(...)  ucs_warn(__VA_ARGS__)
#define zv_log_diag(...)  ucs_diag(__VA_ARGS__)
#define zv_log_debug(...) ucs_debug(__VA_ARGS__)
#define zv_log_trace(...) ucs_trace(__VA_ARGS__)

#endif
