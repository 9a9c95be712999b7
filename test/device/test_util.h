// SPDX-License-Identifier: BSD-3-Clause
// Helpers the device tests share: patterned data, an AM sink, pack/unpack
// callbacks and a counting completion.
#ifndef ZV_TEST_DEVICE_TEST_UTIL_H
#define ZV_TEST_DEVICE_TEST_UTIL_H

#include <uct/api/uct.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace zv::test {

inline void fill(void *p, size_t len, unsigned seed)
{
    auto *b = static_cast<uint8_t *>(p);
    for (size_t i = 0; i < len; ++i) {
        b[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
    }
}

inline bool check(const void *p, size_t len, unsigned seed)
{
    std::vector<uint8_t> want(len);
    fill(want.data(), len, seed);
    return std::memcmp(p, want.data(), len) == 0;
}

struct am_sink {
    std::vector<std::vector<uint8_t>> messages;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
    {
        auto *self = static_cast<am_sink *>(arg);
        auto *b    = static_cast<uint8_t *>(data);
        self->messages.emplace_back(b, b + length);
        return UCS_OK;
    }
};

struct pack_arg {
    const void *src;
    size_t      len;
};

inline size_t pack_cb(void *dest, void *arg)
{
    auto *a = static_cast<pack_arg *>(arg);
    std::memcpy(dest, a->src, a->len);
    return a->len;
}

inline void unpack_cb(void *arg, const void *data, size_t length)
{
    std::memcpy(arg, data, length);
}

struct counting_comp {
    uct_completion_t super;
    int              done = 0;
    ucs_status_t     status = UCS_OK;
    static void cb(uct_completion_t *self)
    {
        auto *c = reinterpret_cast<counting_comp *>(self);
        ++c->done;
        c->status = self->status;
    }
    explicit counting_comp(int count = 1)
    {
        super.func   = cb;
        super.count  = count;
        super.status = UCS_OK;
    }
};

/// An active-message handler that counts the messages.
struct counter_sink {
    unsigned count = 0;
    static ucs_status_t handler(void *arg, void *, size_t, unsigned)
    {
        ++static_cast<counter_sink *>(arg)->count;
        return UCS_OK;
    }
};

/// An active-message handler that keeps the first 8 bytes of each message.
struct am_values {
    std::vector<uint64_t> got;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
    {
        uint64_t v = 0;
        std::memcpy(&v, data, (length < sizeof(v)) ? length : sizeof(v));
        static_cast<am_values *>(arg)->got.push_back(v);
        return UCS_OK;
    }
};

/// A receiver that keeps part of what it receives (its handler answers
/// UCS_INPROGRESS, as UCP does with unexpected eager messages) and gives it
/// back later with uct_iface_release_desc().
struct holding_sink {
    std::vector<uint64_t> got;
    std::vector<void *>   held;
    unsigned              keep_every = 0; ///< keep one in this many (0: none)
    size_t                headroom   = 0; ///< the interface's rx_headroom
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned flags)
    {
        auto *self = static_cast<holding_sink *>(arg);
        uint64_t v = 0;
        std::memcpy(&v, data, (length < sizeof(v)) ? length : sizeof(v));
        self->got.push_back(v);
        if ((self->keep_every == 0) || (v % self->keep_every != 0) ||
            !(flags & UCT_CB_PARAM_FLAG_DESC)) {
            return UCS_OK;
        }
        self->held.push_back(static_cast<char *>(data) - self->headroom);
        return UCS_INPROGRESS;
    }
    void release_all()
    {
        for (void *desc : held) {
            uct_iface_release_desc(desc);
        }
        held.clear();
    }
    /// Each value 0..n-1 once, in order.
    bool in_order(size_t n) const
    {
        if (got.size() != n) {
            return false;
        }
        for (size_t i = 0; i < n; ++i) {
            if (got[i] != i) {
                return false;
            }
        }
        return true;
    }
};

} // namespace zv::test

#endif
