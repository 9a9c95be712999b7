// SPDX-License-Identifier: BSD-3-Clause
// Checks of what a UCT caller passes, shared by the zv transports: the
// interface parameters when one opens, and each send's active message id
// and lengths at the entry points.
#ifndef ZV_IFACE_CHECK_H
#define ZV_IFACE_CHECK_H

#include "iface/zv_iface.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>

namespace zv::iface {

/*
 * A bad send is refused before anything is taken or posted: it returns
 * UCS_ERR_INVALID_PARAM with an error log (naming the "active message id"
 * or the "length", as UCX's own UCT_CHECK_AM_ID and UCT_CHECK_LENGTH do,
 * which UCX's test suite looks for) and leaves the endpoint as it was. A
 * message the peer would drop unacknowledged (an AM id it has no handler
 * slot for) or a work request the device would refuse must never reach
 * the wire: on the reliable transports the first stalls the connection
 * until the peer timeout, the second fails a post. Inline: a compare and
 * an unlikely branch; the logs are out of line.
 */

/// The interface parameters: an AM alignment must be a power of two, an
/// alignment offset needs an alignment and must be smaller than it. Logs
/// and returns UCS_ERR_INVALID_PARAM otherwise. 'tl' names the transport.
[[nodiscard]] ucs_status_t check_iface_params(const char *tl, const uct_iface_params_t *params);

[[gnu::cold, gnu::noinline]] ucs_status_t bad_am_id(const zv_iface *iface, const char *op,
                                                    unsigned id);
[[gnu::cold, gnu::noinline]] ucs_status_t bad_length(const zv_iface *iface, const char *op,
                                                     const char *what, size_t length,
                                                     size_t max);
[[gnu::cold, gnu::noinline]] ucs_status_t bad_iovcnt(const zv_iface *iface, const char *op,
                                                     size_t iovcnt, size_t max);

/// 'id' names a handler slot (< UCT_AM_ID_MAX).
[[nodiscard]] inline ucs_status_t check_am_id(const zv_iface *iface, const char *op,
                                              uint8_t id)
{
    if (__builtin_expect(id >= UCT_AM_ID_MAX, 0)) {
        return bad_am_id(iface, op, id);
    }
    return UCS_OK;
}

/// 'length' bytes of 'what' (payload, header) fit 'max'.
[[nodiscard]] inline ucs_status_t check_length(const zv_iface *iface, const char *op,
                                               const char *what, size_t length, size_t max)
{
    if (__builtin_expect(length > max, 0)) {
        return bad_length(iface, op, what, length, max);
    }
    return UCS_OK;
}

/// check_am_id() and check_length() in one test (an active message send
/// with its header: one predicted branch).
[[nodiscard]] inline ucs_status_t check_am(const zv_iface *iface, const char *op, uint8_t id,
                                           const char *what, size_t length, size_t max)
{
    if (__builtin_expect((id >= UCT_AM_ID_MAX) | (length > max), 0)) {
        return (id >= UCT_AM_ID_MAX) ? bad_am_id(iface, op, id) :
                                       bad_length(iface, op, what, length, max);
    }
    return UCS_OK;
}

/// An iov of 'iovcnt' entries fits 'max'.
[[nodiscard]] inline ucs_status_t check_iovcnt(const zv_iface *iface, const char *op,
                                               size_t iovcnt, size_t max)
{
    if (__builtin_expect(iovcnt > max, 0)) {
        return bad_iovcnt(iface, op, iovcnt, max);
    }
    return UCS_OK;
}

} // namespace zv::iface

#endif
