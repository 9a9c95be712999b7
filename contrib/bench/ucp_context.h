// SPDX-License-Identifier: BSD-3-Clause
// The benchmarks' UCP context (UCX's configuration from the environment).
#ifndef ZV_BENCH_UCP_CONTEXT_H
#define ZV_BENCH_UCP_CONTEXT_H

#include "uct_side.h"

#include <ucp/api/ucp.h>

namespace zv::bench {

/// A UCP context for tag messages, over the transports 'tls' names (UCX_TLS's
/// form) or, without, UCX_TLS's; exits with the reason if there is none.
inline ucp_context_h tag_context(const char *tls = nullptr)
{
    ucp_config_t *cfg;
    must(ucp_config_read(nullptr, nullptr, &cfg), "ucp_config_read");
    if (tls != nullptr) {
        must(ucp_config_modify(cfg, "TLS", tls), "ucp_config_modify(TLS)");
    }
    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = UCP_FEATURE_TAG;
    ucp_context_h ctx;
    must(ucp_init(&params, cfg, &ctx), "ucp_init");
    ucp_config_release(cfg);
    return ctx;
}

} // namespace zv::bench

#endif
