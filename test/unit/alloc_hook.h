// SPDX-License-Identifier: BSD-3-Clause
// Out of memory on demand: replaces operator new (all its forms) so that the
// Nth allocation a thread makes after fail_nth(N) fails. Include it in ONE
// source file of a test program (it defines the replacements), never in a
// program valgrind or a sanitizer runs (they replace operator new
// themselves). Used by zv_nomem (test/unit/nomem_test.cc) and zv_device
// (test/device/nomem_test.cc).
#ifndef ZV_TEST_UNIT_ALLOC_HOOK_H
#define ZV_TEST_UNIT_ALLOC_HOOK_H

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

// Allocations this thread may still make before one fails; < 0: none fails.
thread_local long t_fail_in = -1;
thread_local bool t_failed  = false;

void *allocate(size_t size, size_t align)
{
    if (t_fail_in >= 0) {
        if (t_fail_in-- == 0) {
            t_failed = true;
            return nullptr;
        }
    }
    if (size == 0) {
        size = 1;
    }
    if (align <= alignof(std::max_align_t)) {
        return std::malloc(size);
    }
    return std::aligned_alloc(align, (size + align - 1) / align * align);
}

void *allocate_or_throw(size_t size, size_t align)
{
    void *p = allocate(size, align);
    if (p == nullptr) {
        throw std::bad_alloc();
    }
    return p;
}

} // namespace

void *operator new(size_t size) { return allocate_or_throw(size, 0); }
void *operator new[](size_t size) { return allocate_or_throw(size, 0); }
void *operator new(size_t size, std::align_val_t a)
{
    return allocate_or_throw(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a)
{
    return allocate_or_throw(size, static_cast<size_t>(a));
}
void *operator new(size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0); }
void *operator new[](size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0); }
void *operator new(size_t size, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return allocate(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return allocate(size, static_cast<size_t>(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
    std::free(p);
}

namespace zv::test {

// The Nth allocation of this thread from now fails (0: the next one).
class fail_nth {
public:
    explicit fail_nth(long n)
    {
        t_fail_in = n;
        t_failed  = false;
    }
    ~fail_nth() { t_fail_in = -1; }
    /// Whether the injected failure happened.
    static bool hit() { return t_failed; }
};

} // namespace zv::test

#endif
