// SPDX-License-Identifier: BSD-3-Clause
// Standard-library allocations that return a status instead of throwing.
//
// No exception may leave a function UCX, Open MPI or a C caller of
// libzverbs calls: their frames have no cleanups, and most callers are C.
// Our own objects are allocated with new (std::nothrow); a standard
// container or string that grows calls operator new from inside libstdc++,
// which throws std::bad_alloc whatever this library is compiled with (see
// contrib/doc/design.md, "Out of memory"). Such growth on a path those
// callers reach goes through try_alloc(), and the caller handles the status
// like any other: it releases what it took and returns UCS_ERR_NO_MEMORY.
#ifndef ZV_UTIL_NOTHROW_H_
#define ZV_UTIL_NOTHROW_H_

#include <ucs/type/status.h>

#include <algorithm>
#include <new>
#include <stdexcept>

namespace zv::util {

/// Runs grow() (push_back, emplace, insert, a string built...): UCS_OK, or
/// UCS_ERR_NO_MEMORY when it ran out of memory. The standard containers'
/// single-element insertions then leave the container as it was. Out of line
/// and cold: only slow paths allocate, and the hot paths gain nothing.
template <typename F>
[[nodiscard]] __attribute__((noinline, cold)) ucs_status_t try_alloc(F &&grow) noexcept
{
    try {
        grow();
        return UCS_OK;
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    } catch (const std::length_error &) {
        return UCS_ERR_NO_MEMORY;
    }
}

/// Room for n elements in v, growing by doubling (not one element at a
/// time). Allocates: call it inside try_alloc(), on a slow path, so that
/// a later push_back() where nothing may fail does not.
template <typename V> void reserve_at_least(V &v, size_t n)
{
    if (n > v.capacity()) {
        v.reserve(std::max(n, 2 * v.capacity()));
    }
}

} // namespace zv::util

#endif
