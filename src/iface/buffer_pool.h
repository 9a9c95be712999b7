// SPDX-License-Identifier: BSD-3-Clause
// Pool of fixed-size buffers in registered memory (receive and bounce buffers).
#ifndef ZV_IFACE_BUFFER_POOL_H
#define ZV_IFACE_BUFFER_POOL_H

#include "verbs/device.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zv::iface {

class buffer_pool;

/// UCT release descriptor that knows its interface.
struct release_desc {
    uct_recv_desc_t super;
    void           *owner;
};

/// Header in front of every buffer. The payload starts at data(); for
/// receive buffers, headroom bytes for the upper layer (UCP) sit right
/// before it, and the uct_recv_desc_t pointer UCT expects sits right
/// before the headroom (see uct_recv_desc() in uct/api/tl.h).
struct buffer {
    buffer      *next;   ///< free-list link
    buffer_pool *pool;
    uint32_t     lkey;
    uint32_t     length; ///< bytes used (set by the owner)
    uint64_t     cookie; ///< owner's use

    char *data() const;
};

/// Where a pool's payloads are aligned: (data() + offset) % align == 0 for
/// every buffer. For receive buffers, UCT's am_alignment: 'offset' counts
/// what precedes the active message's data in the buffer (a transport's
/// headers), and the interface's am_align_offset.
struct alignment {
    size_t align  = 8;
    size_t offset = 0;
};

/// The alignment UCT asks for the data of received active messages, which
/// start 'prefix' bytes into a receive buffer's payload (params checked by
/// check_iface_params()).
inline alignment rx_alignment(const uct_iface_params_t *params, size_t prefix)
{
    alignment a;
    if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) {
        a.align  = params->am_alignment;
        a.offset = prefix + ((params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) ?
                             params->am_align_offset : 0);
    }
    return a;
}

/// Grows by registered slabs; get()/put() are a free-list pop/push: no
/// syscall, no lock (an interface is used by one thread at a time, as UCT
/// requires). Not thread safe.
class buffer_pool {
public:
    buffer_pool() = default;
    ~buffer_pool();
    buffer_pool(const buffer_pool &)            = delete;
    buffer_pool &operator=(const buffer_pool &) = delete;

    /// payload: usable bytes per buffer; headroom: bytes reserved before
    /// the payload (receive buffers); per_slab: buffers per registration;
    /// max_buffers: limit of the pool (0: unlimited). access: MR access.
    /// numa_node: the device's NUMA node, where the slabs are allocated
    /// (-1: wherever the kernel puts them). al: where payloads are aligned
    /// (default: 8 bytes).
    [[nodiscard]] ucs_status_t init(const verbs::device *dev, const char *name,
                                    size_t payload, size_t headroom,
                                    unsigned per_slab, unsigned max_buffers,
                                    int access, int numa_node = -1, alignment al = {});

    /// A buffer, or nullptr when the pool is exhausted or cannot grow.
    buffer *get()
    {
        if (__builtin_expect(m_free == nullptr, 0) && (grow() != UCS_OK)) {
            return nullptr;
        }
        buffer *b = m_free;
        m_free    = b->next;
        return b;
    }

    static void put(buffer *b)
    {
        buffer_pool *p = b->pool;
        b->next        = p->m_free;
        p->m_free      = b;
    }

    /// b->data() for a buffer of this pool, without the load of b->pool
    /// (hot paths that know the pool).
    char *data(const buffer *b) const
    {
        return reinterpret_cast<char *>(const_cast<buffer *>(b)) + m_data_offset;
    }

    /// Buffer whose payload starts at 'data'.
    buffer *from_data(const void *data) const
    {
        return reinterpret_cast<buffer *>(const_cast<char *>(
                static_cast<const char *>(data) - m_data_offset));
    }

    /// Where UCT's release pointer for 'b' lives (just before the headroom).
    uct_recv_desc_t **recv_desc_slot(buffer *b) const
    {
        return reinterpret_cast<uct_recv_desc_t **>(
                b->data() - m_headroom - sizeof(uct_recv_desc_t *));
    }

    /// Take up to 'max' buffers and chain them as receive work requests
    /// (wr_id = buffer, one sge of the whole payload). Returns how many.
    unsigned fill_recv_wrs(ibv_recv_wr *wrs, ibv_sge *sges, unsigned max)
    {
        unsigned n = 0;
        for (; n < max; ++n) {
            buffer *b = get();
            if (b == nullptr) {
                break;
            }
            sges[n].addr   = reinterpret_cast<uintptr_t>(data(b));
            sges[n].length = static_cast<uint32_t>(m_payload);
            sges[n].lkey   = b->lkey;
            wrs[n].wr_id   = reinterpret_cast<uintptr_t>(b);
            wrs[n].sg_list = &sges[n];
            wrs[n].num_sge = 1;
            wrs[n].next    = &wrs[n + 1];
        }
        if (n > 0) {
            wrs[n - 1].next = nullptr;
        }
        return n;
    }

    /// At interface creation: register the first slab now, so an interface
    /// that cannot have a single buffer of this kind fails to open, with the
    /// reason, instead of failing its sends later.
    [[nodiscard]] ucs_status_t reserve() { return (m_allocated > 0) ? UCS_OK : grow(); }

    size_t payload() const { return m_payload; }
    size_t headroom() const { return m_headroom; }
    size_t data_offset() const { return m_data_offset; }
    unsigned allocated() const { return m_allocated; }

private:
    [[nodiscard]] ucs_status_t grow();

    struct slab {
        void   *mem;
        size_t  size;
        ibv_mr *mr;
    };

    const verbs::device *m_dev         = nullptr;
    const char          *m_name        = "";
    buffer              *m_free        = nullptr;
    size_t               m_payload     = 0;
    size_t               m_headroom    = 0;
    size_t               m_data_offset = 0; ///< buffer header -> payload
    size_t               m_stride      = 0;
    size_t               m_base_align  = 4096; ///< of a slab's first buffer
    unsigned             m_per_slab    = 0;
    unsigned             m_max         = 0;
    int                  m_numa_node   = -1;
    unsigned             m_allocated   = 0;
    int                  m_access      = 0;
    unsigned             m_failures    = 0; ///< slabs that could not be registered
    unsigned             m_skip        = 0; ///< grow() calls left to refuse at once
    std::vector<slab>    m_slabs;
};

inline char *buffer::data() const
{
    return reinterpret_cast<char *>(const_cast<buffer *>(this)) + pool->data_offset();
}

} // namespace zv::iface

#endif
