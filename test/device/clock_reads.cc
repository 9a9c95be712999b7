// SPDX-License-Identifier: BSD-3-Clause
// Counts the clock reads that are system calls, per thread: this program's
// gettimeofday() and clock_gettime() take the place of libc's for UCX and
// the module (the executable's definitions come first in symbol lookup).
#include "clock_reads.h"

#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include <ucs/time/time.h>

namespace {

thread_local unsigned long t_reads = 0;

template <typename F> F next_symbol(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" int gettimeofday(struct timeval *__restrict tv, void *__restrict tz) noexcept
{
    using fn       = int (*)(struct timeval *, void *);
    static fn real = next_symbol<fn>("gettimeofday");
    ++t_reads;
    return real(tv, tz);
}

extern "C" int clock_gettime(clockid_t id, struct timespec *ts) noexcept
{
    using fn       = int (*)(clockid_t, struct timespec *);
    static fn real = next_symbol<fn>("clock_gettime");
    ++t_reads;
    return real(id, ts);
}

namespace zv::test {

unsigned long clock_reads() { return t_reads; }

bool ucx_clock_is_a_call()
{
    unsigned long before = t_reads;
    (void)ucs_get_time();
    return t_reads != before;
}

} // namespace zv::test
