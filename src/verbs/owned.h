// SPDX-License-Identifier: BSD-3-Clause
// Owning handles of verbs objects: CQs, SRQs, completion channels, QPs, AHs.
#ifndef ZV_VERBS_OWNED_H
#define ZV_VERBS_OWNED_H

#include <infiniband/verbs.h>

#include <utility>

namespace zv::verbs {

/// Destroy a verbs object, warning once (never failing) when verbs refuses,
/// with the device's name (a QP's number). What the handles below call.
void destroy_cq(ibv_cq *cq);
void destroy_srq(ibv_srq *srq);
void destroy_comp_channel(ibv_comp_channel *channel);
void destroy_qp(ibv_qp *qp);
void destroy_ah(ibv_ah *ah);

/// Owns one verbs object and destroys it with the handle: move-only, a
/// pointer wide, get() inline, so that a hot path reads it as it read the
/// raw pointer. Not thread safe. Where several objects must go in an order
/// their owners' destruction does not give (QPs before their CQs, CQs
/// before their channel), the owner reset()s them in that order.
template <typename T, void (*Destroy)(T *)> class owned {
public:
    owned() = default;
    /// Takes 'obj' (may be null: ibv_create_*() failed).
    explicit owned(T *obj) noexcept : m_obj(obj) {}
    ~owned() { reset(); }
    owned(owned &&other) noexcept : m_obj(other.release()) {}
    owned &operator=(owned &&other) noexcept
    {
        if (this != &other) {
            reset(other.release());
        }
        return *this;
    }
    owned(const owned &)            = delete;
    owned &operator=(const owned &) = delete;

    T *get() const noexcept { return m_obj; }
    T *operator->() const noexcept { return m_obj; }
    explicit operator bool() const noexcept { return m_obj != nullptr; }

    /// The object, no longer owned.
    [[nodiscard]] T *release() noexcept { return std::exchange(m_obj, nullptr); }

    /// Destroy the object held, if any, and take 'obj'.
    void reset(T *obj = nullptr) noexcept
    {
        T *old = std::exchange(m_obj, obj);
        if (old != nullptr) {
            Destroy(old);
        }
    }

private:
    T *m_obj = nullptr;
};

using cq           = owned<ibv_cq, destroy_cq>;
using srq          = owned<ibv_srq, destroy_srq>;
using comp_channel = owned<ibv_comp_channel, destroy_comp_channel>;
using qp           = owned<ibv_qp, destroy_qp>;
using ah           = owned<ibv_ah, destroy_ah>;

} // namespace zv::verbs

#endif
