// SPDX-License-Identifier: BSD-3-Clause
// What a completion's QP number belongs to, in two loads: QP numbers are 24
// bits; the high 12 pick a chunk, the low 12 the entry in it. A chunk is
// allocated when its first QP is added and freed with its last, so memory
// follows the QPs that exist, wherever the device numbers them.
#ifndef ZV_IFACE_QP_TABLE_H
#define ZV_IFACE_QP_TABLE_H

#include <cstdint>
#include <memory>
#include <new>

namespace zv::iface {

/// Values of T (small, default-constructed = "none") by QP number.
template <class T> class qp_table {
public:
    static constexpr unsigned order = 12;
    static constexpr uint32_t mask  = (1u << order) - 1;

    /// The entry of 'qpn' (a default T when it has none).
    const T &find(uint32_t qpn) const
    {
        static const T none{};
        const chunk *c = m_chunks[(qpn >> order) & mask].get();
        return (c != nullptr) ? c->entries[qpn & mask] : none;
    }

    /// The entry of 'qpn' to fill in; false (nothing changed) if memory is short.
    /// Counted once per QP until remove().
    [[nodiscard]] bool add(uint32_t qpn, const T &value)
    {
        std::unique_ptr<chunk> &c = m_chunks[(qpn >> order) & mask];
        if (c == nullptr) {
            c.reset(new (std::nothrow) chunk{});
            if (c == nullptr) {
                return false;
            }
        }
        c->entries[qpn & mask] = value;
        ++c->used;
        return true;
    }

    /// Change the entry of a QP that was added.
    T &at(uint32_t qpn) { return m_chunks[(qpn >> order) & mask]->entries[qpn & mask]; }

    /// Forget a QP that was added; its chunk goes with the last one.
    void remove(uint32_t qpn)
    {
        std::unique_ptr<chunk> &c = m_chunks[(qpn >> order) & mask];
        c->entries[qpn & mask] = T{};
        if (--c->used == 0) {
            c.reset();
        }
    }

private:
    struct chunk {
        T        entries[mask + 1];
        unsigned used = 0;
    };
    std::unique_ptr<chunk> m_chunks[mask + 1];
};

} // namespace zv::iface

#endif
