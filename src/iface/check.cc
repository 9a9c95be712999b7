// SPDX-License-Identifier: BSD-3-Clause
// The slow half of check.h: parameter checks at open, and the logs of a
// refused send.
#include "iface/check.h"

#include <ucs/debug/log_def.h>

namespace zv::iface {

ucs_status_t check_iface_params(const char *tl, const uct_iface_params_t *params)
{
    const uint64_t mask = params->field_mask;
    if (!(mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
        if (mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
            ucs_error("%s: an AM alignment offset (%zu) without an AM alignment", tl,
                      params->am_align_offset);
            return UCS_ERR_INVALID_PARAM;
        }
        return UCS_OK;
    }
    const size_t align = params->am_alignment;
    if ((align == 0) || ((align & (align - 1)) != 0)) {
        ucs_error("%s: invalid AM alignment %zu: a power of two is required", tl, align);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) && (params->am_align_offset >= align)) {
        ucs_error("%s: invalid AM alignment offset %zu: less than the alignment %zu is "
                  "required", tl, params->am_align_offset, align);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t bad_am_id(const zv_iface *iface, const char *op, unsigned id)
{
    ucs_error("%s: %s: invalid active message id %u (valid range: 0..%d)", iface->tl_name,
              op, id, static_cast<int>(UCT_AM_ID_MAX) - 1);
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t bad_length(const zv_iface *iface, const char *op, const char *what,
                        size_t length, size_t max)
{
    ucs_error("%s: %s: invalid %s length %zu (expected <= %zu)", iface->tl_name, op, what,
              length, max);
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t bad_iovcnt(const zv_iface *iface, const char *op, size_t iovcnt, size_t max)
{
    ucs_error("%s: %s: iov of %zu entries (expected <= %zu)", iface->tl_name, op, iovcnt,
              max);
    return UCS_ERR_INVALID_PARAM;
}

} // namespace zv::iface
