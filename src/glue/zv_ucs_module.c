/* SPDX-License-Identifier: BSD-3-Clause */
/* libucs_zv: UCP's defaults for zv, set before UCP reads its configuration. */

/*
 * zv's md caches its registrations, invalidated by the kernel, and reports
 * host memory as cacheable to UCP only because UCP's protocols assert that
 * every lane's md is (src/ucx/compat.h). While UCP's own registration cache
 * exists, UCP's zero-copy protocols then keep zv's registrations a second
 * time (ucp_datatype_iter_mem_reg_single -> ucp_memh_get), keyed by address
 * and dropped only on UCM's events. So UCP's cache must be off where zv may
 * be selected (zv_ucp_defaults.h).
 *
 * libuct_zv's constructor sets that default when the module is in the
 * process before UCP starts (LD_PRELOAD, the Open MPI component). UCX
 * 1.22's loader opens libuct_zv only when UCP queries its transports, after
 * ucp_config_read() has read UCX_RCACHE_ENABLE. The loader opens
 * lib<framework>_<name> for each framework from the same directories
 * (UCX's module directory, UCX_PLUGIN_PATH): this library is the ucs
 * framework's, opened from libucs's constructor, before any configuration
 * is read. UCX_MODULES=^zv leaves it out with libuct_zv. It uses nothing of
 * UCX, only the environment, and is never opened by UCX 1.13 to 1.21.
 */
#include "glue/zv_ucp_defaults.h"

__attribute__((constructor)) static void zv_ucs_module_init(void)
{
    zv_set_ucp_defaults();
}
