// SPDX-License-Identifier: BSD-3-Clause
// libzverbs internals for the unit tests (not installed): a cache over any backend, the log knob.
#ifndef ZV_CAPI_ZVERBS_INTERNAL_H_
#define ZV_CAPI_ZVERBS_INTERNAL_H_

#include <zverbs/zverbs.h>

#include "rcache/backend.h"
#include "rcache/region.h"

namespace zv::capi {

// zv_cache_open() over be instead of an ibv_pd (be must outlive the cache;
// the cache does not delete it). Same parameters, errors and monitors.
[[nodiscard]] int open_on_backend(rcache::backend *be, const struct zv_cache_params *params,
                                  zv_cache_t **cache_p);

// ZVERBS_LOG_LEVEL: "none" (also NULL or unknown), "fatal", "error", "warn",
// "diag", "info", "debug", "trace". Sets zv::g_log_cap; false on an
// unknown value (then "none").
bool set_log_level(const char *value);

inline const rcache::region *to_region(const zv_region_t *r)
{
    return reinterpret_cast<const rcache::region *>(r);
}

} // namespace zv::capi

#endif
