/* SPDX-License-Identifier: BSD-3-Clause */
/* The public header compiled as strict C99 (-pedantic -Werror), and the API called from C. */
#include <zverbs/zverbs.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" /* test/unit/asan.sh compiles this file with g++ */
#endif
int zv_test_c_api(zv_cache_t *cache, void *buf, size_t len);

/* 0, or the line of the first check that failed. */
int zv_test_c_api(zv_cache_t *cache, void *buf, size_t len)
{
    const unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    struct zv_cache_stats stats;
    struct zv_cache_params params;
    zv_region_t *region = NULL;
    uintptr_t start;
    int rc;

    zv_cache_params_init(&params);
    if ((params.size != sizeof(params)) || (params.max_size != ZV_LIMIT_AUTO) ||
        (params.max_regions != ZV_LIMIT_AUTO) || (params.odp != 1) ||
        (strcmp(params.monitor, "auto") != 0)) {
        return __LINE__;
    }
    if (zv_cache_get(cache, buf, 0, access, &region) != -EINVAL) {
        return __LINE__;
    }
    rc = zv_cache_get(cache, buf, len, access, &region);
    if ((rc != 0) || (region == NULL)) {
        return __LINE__;
    }
    start = (uintptr_t)zv_region_addr(region);
    if ((start > (uintptr_t)buf) ||
        (start + zv_region_length(region) < (uintptr_t)buf + len) ||
        ((zv_region_access(region) & access) != access) || (zv_region_lkey(region) == 0)) {
        zv_cache_put(cache, region);
        return __LINE__;
    }
    zv_cache_put(cache, region);
    if (zv_cache_read_stats(cache, &stats, sizeof(stats)) != 0) {
        return __LINE__;
    }
    if ((stats.registrations == 0) || (zv_cache_monitor(cache) == NULL) ||
        (zv_strerror(-EBUSY) == NULL)) {
        return __LINE__;
    }
    zv_cache_flush(cache);
    return 0;
}
