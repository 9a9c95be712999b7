// SPDX-License-Identifier: BSD-3-Clause
// Registered buffer pool: slab allocation and registration (slow path).
#include "iface/buffer_pool.h"
#include "util/nothrow.h"
#include "verbs/locality.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace zv::iface {

namespace {
constexpr size_t cache_line = 64;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
} // namespace

buffer_pool::~buffer_pool()
{
    for (auto &s : m_slabs) {
        int ret = ibv_dereg_mr(s.mr);
        if (ret != 0) {
            ucs_warn("%s: ibv_dereg_mr() of a %s slab failed: %s",
                     m_dev->name().c_str(), m_name, strerror(ret));
        }
        munmap(s.mem, s.size);
    }
}

ucs_status_t buffer_pool::init(const verbs::device *dev, const char *name,
                               size_t payload, size_t headroom, unsigned per_slab,
                               unsigned max_buffers, int access, int numa_node,
                               alignment al)
{
    m_dev      = dev;
    m_name     = name;
    m_payload  = payload;
    m_headroom = headroom;
    m_per_slab = (per_slab == 0) ? 1 : per_slab;
    m_max      = max_buffers;
    m_access   = access;
    m_numa_node = numa_node;
    // [buffer][pad][recv_desc ptr][headroom][payload]: the pad puts
    // payload + al.offset on an al.align boundary, every buffer starting on
    // one (the stride and the slab's base are multiples of it).
    const size_t min_offset = sizeof(buffer) + sizeof(uct_recv_desc_t *) + headroom;
    m_data_offset = align_up(min_offset + al.offset, al.align) - al.offset;
    m_stride      = align_up(m_data_offset + payload, std::max(cache_line, al.align));
    m_base_align  = std::max<size_t>(4096, al.align);
    return UCS_OK;
}

ucs_status_t buffer_pool::grow()
{
    unsigned count = m_per_slab;
    if (m_max != 0) {
        if (m_allocated >= m_max) {
            return UCS_ERR_NO_RESOURCE;
        }
        count = std::min(count, m_max - m_allocated);
    }

    if (m_skip > 0) {
        // The last registration failed (out of locked memory): do not pay a
        // failing system call on every progress; try again a while later.
        --m_skip;
        return UCS_ERR_NO_RESOURCE;
    }

    // (mmap gives pages; a larger alignment takes one more of it, and the
    // buffers start at its first boundary.)
    const size_t extra = (m_base_align > 4096) ? m_base_align : 0;
    size_t size = align_up(count * m_stride, 4096) + extra;
    void *mem   = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        ucs_error("%s: cannot allocate %zu bytes of %s buffers: %m",
                  m_dev->name().c_str(), size, m_name);
        return UCS_ERR_NO_MEMORY;
    }
    // Never shared with a child: a forked child must not touch pages the
    // device may still write into.
    (void)madvise(mem, size, MADV_DONTFORK);
    // Near the device: registering touches the pages, so they land there.
    if ((m_numa_node >= 0) && !verbs::bind_to_numa_node(mem, size, m_numa_node)) {
        ucs_debug("%s: %s buffers not bound to NUMA node %d", m_dev->name().c_str(), m_name,
                  m_numa_node);
    }
    ibv_mr *mr = ibv_reg_mr(m_dev->pd(), mem, size, m_access);
    if (mr == nullptr) {
        const int err = errno;
        // Said once per pool: the pool keeps working with what it has, and
        // retries after 1024 more requests.
        ucs_log((m_failures++ == 0) ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DEBUG,
                "%s: ibv_reg_mr() of %zu bytes of %s buffers failed: %s%s (%u registered)",
                m_dev->name().c_str(), size, m_name, strerror(err),
                (err == ENOMEM) ? " (locked memory limit? see ulimit -l)" : "", m_allocated);
        munmap(mem, size);
        m_skip = 1024;
        return verbs::status_from_errno(err);
    }
    if (util::try_alloc([&] { m_slabs.push_back({mem, size, mr}); }) != UCS_OK) {
        ucs_error("%s: no memory to keep a slab of %s buffers", m_dev->name().c_str(), m_name);
        (void)ibv_dereg_mr(mr);
        munmap(mem, size);
        return UCS_ERR_NO_MEMORY;
    }

    char *base = reinterpret_cast<char *>(align_up(reinterpret_cast<uintptr_t>(mem),
                                                   m_base_align));
    for (unsigned i = 0; i < count; ++i) {
        auto *b = reinterpret_cast<buffer *>(base + i * m_stride);
        b->pool = this;
        b->lkey = mr->lkey;
        b->next = m_free;
        m_free  = b;
    }
    m_allocated += count;
    return UCS_OK;
}

} // namespace zv::iface
