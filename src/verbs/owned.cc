// SPDX-License-Identifier: BSD-3-Clause
// What the owning handles call to destroy CQs, SRQs, channels and AHs.
#include "verbs/owned.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace zv::verbs {

namespace {

/// (The context outlives what was made on it: read before destroying.)
const char *device_name(const ibv_context *ctx)
{
    return ibv_get_device_name(ctx->device);
}

} // namespace

// ibv_destroy_*() return the errno value (a channel with CQs on it answers
// EBUSY without setting errno): that is what the warnings print.

void destroy_cq(ibv_cq *cq)
{
    const ibv_context *ctx = cq->context;
    int ret                = ibv_destroy_cq(cq);
    if (ret != 0) {
        ucs_warn("%s: ibv_destroy_cq() failed: %s", device_name(ctx), strerror(ret));
    }
}

void destroy_srq(ibv_srq *srq)
{
    const ibv_context *ctx = srq->context;
    int ret                = ibv_destroy_srq(srq);
    if (ret != 0) {
        ucs_warn("%s: ibv_destroy_srq() failed: %s", device_name(ctx), strerror(ret));
    }
}

void destroy_comp_channel(ibv_comp_channel *channel)
{
    const ibv_context *ctx = channel->context;
    int ret                = ibv_destroy_comp_channel(channel);
    if (ret != 0) {
        ucs_warn("%s: ibv_destroy_comp_channel() failed: %s", device_name(ctx),
                 strerror(ret));
    }
}

void destroy_ah(ibv_ah *ah)
{
    const ibv_context *ctx = ah->context;
    int ret                = ibv_destroy_ah(ah);
    if (ret != 0) {
        ucs_warn("%s: ibv_destroy_ah() failed: %s", device_name(ctx), strerror(ret));
    }
}

} // namespace zv::verbs
