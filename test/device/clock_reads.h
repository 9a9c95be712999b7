// SPDX-License-Identifier: BSD-3-Clause
// Clock reads by this thread, where they are calls into libc (and from there
// system calls when the kernel's clock source has no vDSO path, as HPET).
#ifndef ZV_TEST_DEVICE_CLOCK_READS_H
#define ZV_TEST_DEVICE_CLOCK_READS_H

namespace zv::test {

/// gettimeofday() and clock_gettime() calls of this thread so far.
unsigned long clock_reads();

/// Whether UCX's ucs_get_time() calls gettimeofday() here: it does where
/// it does not trust the TSC (no invariant TSC, as in the Soft-RoCE VM),
/// and reads the TSC, no call at all, elsewhere.
bool ucx_clock_is_a_call();

} // namespace zv::test

#endif
