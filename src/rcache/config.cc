// SPDX-License-Identifier: BSD-3-Clause
// Registration-cache settings: the "auto" limits.
#include "rcache/config.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace zv::rcache {

namespace {

// RLIMIT_MEMLOCK does not bound pinning for a process with CAP_IPC_LOCK.
bool has_ipc_lock()
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct   data[2] = {};
    if (syscall(SYS_capget, &hdr, data) != 0) {
        return false;
    }
    return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

} // namespace

limits resolve_limits(const config &cfg, uint64_t device_max_mr)
{
    const long   cpus_l = sysconf(_SC_NPROCESSORS_ONLN);
    const size_t cpus   = (cpus_l > 0) ? static_cast<size_t>(cpus_l) : 1;
    limits       l{};

    if (cfg.max_size == k_units_auto) {
        const long   pages = sysconf(_SC_PHYS_PAGES);
        const long   psize = sysconf(_SC_PAGESIZE);
        const size_t phys  = ((pages > 0) && (psize > 0)) ?
                                 static_cast<size_t>(pages) * static_cast<size_t>(psize) :
                                 (size_t(1) << 32);
        l.max_size         = phys / (2 * cpus);
        struct rlimit rl   = {};
        if ((getrlimit(RLIMIT_MEMLOCK, &rl) == 0) && (rl.rlim_cur != RLIM_INFINITY) &&
            !has_ipc_lock()) {
            l.max_size = std::min<size_t>(l.max_size, rl.rlim_cur / 4 * 3);
        }
    } else {
        l.max_size = cfg.max_size; // k_units_inf is SIZE_MAX: no limit
    }

    if (cfg.max_regions == k_units_auto) {
        l.max_regions = 16384;
        if (device_max_mr != 0) {
            l.max_regions = std::min<size_t>(l.max_regions,
                                             std::max<size_t>(device_max_mr / cpus, 1));
        }
    } else {
        l.max_regions = cfg.max_regions;
    }
    return l;
}

} // namespace zv::rcache
