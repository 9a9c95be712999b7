// SPDX-License-Identifier: BSD-3-Clause
// Fault injection in the receive path of the software-reliable transports:
// drop, duplicate or hold back (reorder) received packets with a seed.
#ifndef ZV_IFACE_FAULT_H
#define ZV_IFACE_FAULT_H

#include <cstdint>

namespace zv::iface {

/// Rates are probabilities per received packet (0 = off, the default).
struct fault_settings {
    double   drop    = 0;
    double   dup     = 0;
    double   reorder = 0;
    uint64_t seed    = 1;

    bool enabled() const { return (drop > 0) || (dup > 0) || (reorder > 0); }
};

/// Deterministic for a seed (splitmix64). One per interface; not thread safe.
class fault_injector {
public:
    enum class action : uint8_t { pass, drop, dup, hold };

    void init(const fault_settings &s)
    {
        m_s     = s;
        m_state = s.seed;
        // Thresholds on the top 53 bits: no floating point per packet.
        m_drop    = threshold(s.drop);
        m_dup     = m_drop + threshold(s.dup);
        m_reorder = m_dup + threshold(s.reorder);
        m_on      = s.enabled();
    }

    bool on() const { return m_on; }

    /// What to do with the next received packet.
    action next()
    {
        uint64_t r = next_u64() >> 11;
        if (r < m_drop) {
            ++dropped;
            return action::drop;
        }
        if (r < m_dup) {
            ++duplicated;
            return action::dup;
        }
        if (r < m_reorder) {
            ++held;
            return action::hold;
        }
        return action::pass;
    }

    uint64_t dropped    = 0;
    uint64_t duplicated = 0;
    uint64_t held       = 0;

private:
    static uint64_t threshold(double p)
    {
        constexpr double scale = 9007199254740992.0; // 2^53
        return (p <= 0) ? 0 : (p >= 1) ? (1ull << 53) : static_cast<uint64_t>(p * scale);
    }

    uint64_t next_u64()
    {
        uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    fault_settings m_s;
    uint64_t       m_state   = 1;
    uint64_t       m_drop    = 0;
    uint64_t       m_dup     = 0;
    uint64_t       m_reorder = 0;
    bool           m_on      = false;
};

} // namespace zv::iface

#endif
