// SPDX-License-Identifier: BSD-3-Clause
// libzverbs: the C API over zv::rcache::cache, with process-wide monitors shared by its caches.
#include "capi/zverbs_internal.h"

#include "monitor/monitor.h"
#include "rcache/cache.h"
#include "rcache/config.h"
#include "rcache/ibv_backend.h"
#include "util/log.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <strings.h>

struct zv_cache {
    zv::rcache::cache   *cache   = nullptr;
    zv::rcache::backend *backend = nullptr;
    bool                 owns_backend = false;
    // The shared monitor this cache holds a reference on (nullptr: "none").
    zv::monitor::monitor *monitor = nullptr;
};

namespace zv::capi {

namespace {

// One monitor per kind for the whole process, shared by the caches of this
// library: two userfaultfds cannot watch the same mapping, and one ucm
// handler serves all caches. Created by the first cache that asks for it,
// destroyed with the last.
struct shared_monitors {
    std::mutex        lock;
    monitor::monitor *mon[2]  = {nullptr, nullptr}; // uffd, ucm
    unsigned          refs[2] = {0, 0};
};

shared_monitors &monitors()
{
    static shared_monitors s; // never destroyed before the caches using it
    return s;
}

int slot_of(rcache::monitor_kind kind) { return (kind == rcache::monitor_kind::uffd) ? 0 : 1; }

int to_errno(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return 0;
    case UCS_ERR_INVALID_PARAM:
        return -EINVAL;
    case UCS_ERR_NO_MEMORY:
        return -ENOMEM;
    case UCS_ERR_UNSUPPORTED:
        return -EOPNOTSUPP;
    case UCS_ERR_BUSY:
        return -EBUSY;
    case UCS_ERR_NO_RESOURCE:
        return -ENOSPC;
    default:
        return -EIO;
    }
}

// A reference on the shared monitor for cfg.monitor; *out nullptr for none.
int acquire_monitor(const rcache::config &cfg, monitor::monitor **out)
{
    shared_monitors            &s = monitors();
    std::lock_guard<std::mutex> guard(s.lock);
    rcache::monitor_kind        want = cfg.monitor;
    if (want == rcache::monitor_kind::none) {
        *out = nullptr;
        return 0;
    }
    if ((want == rcache::monitor_kind::automatic) && (s.mon[0] != nullptr)) {
        want = rcache::monitor_kind::uffd; // the preferred one is there already
    }
    if (want != rcache::monitor_kind::automatic) {
        const int i = slot_of(want);
        if (s.mon[i] == nullptr) {
            rcache::config one = cfg;
            one.monitor        = want;
            monitor::monitor *mon = nullptr;
            const ucs_status_t status = monitor::create(one.monitor_settings(), &mon);
            if (status != UCS_OK) {
                return (status == UCS_ERR_NO_MEMORY) ? -ENOMEM : -EOPNOTSUPP;
            }
            s.mon[i] = mon;
        }
        ++s.refs[i];
        *out = s.mon[i];
        return 0;
    }
    // auto, no uffd monitor yet: the factory's choice, unless it is one we have.
    monitor::monitor  *mon    = nullptr;
    const ucs_status_t status = monitor::create(cfg.monitor_settings(), &mon);
    if (status != UCS_OK) {
        return to_errno(status);
    }
    if (mon->kind() == rcache::monitor_kind::none) {
        monitor::destroy(mon);
        *out = nullptr;
        return 0;
    }
    const int i = slot_of(mon->kind());
    if (s.mon[i] == nullptr) {
        s.mon[i] = mon;
    } else {
        monitor::destroy(mon);
    }
    ++s.refs[i];
    *out = s.mon[i];
    return 0;
}

void release_monitor(monitor::monitor *mon)
{
    if (mon == nullptr) {
        return;
    }
    shared_monitors            &s = monitors();
    std::lock_guard<std::mutex> guard(s.lock);
    const int                   i = slot_of(mon->kind());
    if (--s.refs[i] == 0) {
        monitor::destroy(s.mon[i]);
        s.mon[i] = nullptr;
    }
}

// params (or the defaults) into the cache's config and name (nullptr: not
// given); -EINVAL on bad values.
int to_config(const struct zv_cache_params *params, rcache::config *cfg, const char **name)
{
    struct zv_cache_params p;
    zv_cache_params_init(&p);
    if (params != nullptr) {
        if (params->size < offsetof(struct zv_cache_params, monitor)) {
            return -EINVAL;
        }
        // Fields the caller's struct has; the rest keep their defaults.
        std::memcpy(&p, params, std::min(params->size, sizeof(p)));
    }
    if ((p.monitor != nullptr) &&
        (rcache::parse_monitor_kind(p.monitor, &cfg->monitor) != UCS_OK)) {
        return -EINVAL;
    }
    if ((p.max_size == 0) || (p.max_regions == 0)) {
        return -EINVAL; // a cache that can keep nothing: say "none" instead
    }
    cfg->max_size    = p.max_size;
    cfg->max_regions = p.max_regions;
    if (p.event_queue != 0) {
        cfg->event_queue = p.event_queue;
    }
    cfg->odp = (p.odp != 0);
    *name    = p.name;
    return 0;
}

int open_cache(rcache::backend *be, bool owns_backend, const rcache::config &cfg,
               const char *name, zv_cache_t **cache_p)
{
    auto *zc = new (std::nothrow) zv_cache();
    if (zc == nullptr) {
        return -ENOMEM;
    }
    zc->backend      = be;
    zc->owns_backend = owns_backend;
    int rc = acquire_monitor(cfg, &zc->monitor);
    if (rc == 0) {
        rc = to_errno(rcache::cache::create(cfg, be, zc->monitor, name, &zc->cache));
    }
    if (rc != 0) {
        release_monitor(zc->monitor);
        if (owns_backend) {
            delete be;
        }
        delete zc;
        return rc;
    }
    *cache_p = zc;
    return 0;
}

} // namespace

int open_on_backend(rcache::backend *be, const struct zv_cache_params *params,
                    zv_cache_t **cache_p)
{
    rcache::config cfg;
    const char    *name = nullptr;
    if ((be == nullptr) || (cache_p == nullptr)) {
        return -EINVAL;
    }
    const int rc = to_config(params, &cfg, &name);
    if (rc != 0) {
        return rc;
    }
    return open_cache(be, false, cfg, (name != nullptr) ? name : "zverbs", cache_p);
}

bool set_log_level(const char *value)
{
    static const struct {
        const char *name;
        int         level;
    } levels[] = {{"none", -1},
                  {"fatal", UCS_LOG_LEVEL_FATAL},
                  {"error", UCS_LOG_LEVEL_ERROR},
                  {"warn", UCS_LOG_LEVEL_WARN},
                  {"diag", UCS_LOG_LEVEL_DIAG},
                  {"info", UCS_LOG_LEVEL_INFO},
                  {"debug", UCS_LOG_LEVEL_DEBUG},
                  {"trace", UCS_LOG_LEVEL_TRACE}};
    for (const auto &l : levels) {
        if ((value != nullptr) && (strcasecmp(value, l.name) == 0)) {
            zv::g_log_cap.store(l.level, std::memory_order_relaxed);
            return true;
        }
    }
    zv::g_log_cap.store(-1, std::memory_order_relaxed);
    return value == nullptr;
}

} // namespace zv::capi

using zv::capi::to_region;

// The only symbols libzverbs exports (the build hides everything else).
#define ZV_API __attribute__((visibility("default")))

extern "C" {

ZV_API void zv_cache_params_init(struct zv_cache_params *params)
{
    if (params == nullptr) {
        return;
    }
    std::memset(params, 0, sizeof(*params));
    params->size        = sizeof(*params);
    params->monitor     = zv::rcache::k_monitor_default;
    params->max_size    = ZV_LIMIT_AUTO;
    params->max_regions = ZV_LIMIT_AUTO;
    params->odp         = 1;
}

ZV_API int
zv_cache_open(struct ibv_pd *pd, const struct zv_cache_params *params, zv_cache_t **cache_p)
{
    zv::rcache::config cfg;
    const char        *name = nullptr;
    if ((pd == nullptr) || (cache_p == nullptr)) {
        return -EINVAL;
    }
    int rc = zv::capi::to_config(params, &cfg, &name);
    if (rc != 0) {
        return rc;
    }
    zv::rcache::ibv_backend *be = nullptr;
    rc = zv::capi::to_errno(zv::rcache::ibv_backend::create(
            pd, cfg.odp, zv::rcache::k_odp_rc | zv::rcache::k_odp_uc | zv::rcache::k_odp_ud,
            &be));
    if (rc != 0) {
        return rc;
    }
    return zv::capi::open_cache(be, true, cfg,
                                (name != nullptr) ? name : ibv_get_device_name(pd->context->device),
                                cache_p);
}

ZV_API int zv_cache_close(zv_cache_t *cache)
{
    if (cache == nullptr) {
        return -EINVAL;
    }
    if (cache->cache->in_use() != 0) {
        return -EBUSY;
    }
    zv::rcache::cache::destroy(cache->cache);
    zv::capi::release_monitor(cache->monitor);
    if (cache->owns_backend) {
        delete cache->backend;
    }
    delete cache;
    return 0;
}

ZV_API int zv_cache_get(zv_cache_t *cache, void *addr,
                                                        size_t length, unsigned access,
                                                        zv_region_t **region_p)
{
    if ((cache == nullptr) || (addr == nullptr) || (length == 0) || (region_p == nullptr)) {
        return -EINVAL;
    }
    zv::rcache::region *r;
    const ucs_status_t  status = cache->cache->get(addr, length, access, &r);
    if (status != UCS_OK) {
        // The backends say IO_ERROR for memory the device refuses (EFAULT).
        return (status == UCS_ERR_IO_ERROR) ? -EFAULT : zv::capi::to_errno(status);
    }
    *region_p = reinterpret_cast<zv_region_t *>(r);
    return 0;
}

ZV_API void zv_cache_put(zv_cache_t *cache, zv_region_t *region)
{
    cache->cache->put(reinterpret_cast<zv::rcache::region *>(region));
}

ZV_API uint32_t zv_region_lkey(const zv_region_t *region)
{
    return to_region(region)->lkey();
}

ZV_API uint32_t zv_region_rkey(const zv_region_t *region)
{
    return to_region(region)->rkey();
}

ZV_API void *zv_region_addr(const zv_region_t *region)
{
    return reinterpret_cast<void *>(to_region(region)->start());
}

ZV_API size_t zv_region_length(const zv_region_t *region)
{
    return to_region(region)->end() - to_region(region)->start();
}

ZV_API unsigned zv_region_access(const zv_region_t *region)
{
    return to_region(region)->access();
}

ZV_API const char *zv_cache_monitor(zv_cache_t *cache)
{
    return (cache != nullptr) ? cache->cache->mode_name() : "none";
}

ZV_API int zv_cache_read_stats(zv_cache_t *cache,
                                                          struct zv_cache_stats *stats,
                                                          size_t size)
{
    if ((cache == nullptr) || (stats == nullptr)) {
        return -EINVAL;
    }
    const zv::rcache::cache_stats s = cache->cache->stats();
    struct zv_cache_stats         out;
    out.misses          = s.misses;
    out.registrations   = s.registrations;
    out.deregistrations = s.deregistrations;
    out.evictions       = s.evictions;
    out.invalidations   = s.invalidations;
    out.flushes         = s.flushes;
    out.reg_retries     = s.reg_retries;
    out.uncached        = s.uncached;
    out.cached_regions  = s.cached_regions;
    out.cached_bytes    = s.cached_bytes;
    out.max_regions     = s.max_regions;
    out.max_size        = s.max_size;
    std::memcpy(stats, &out, std::min(size, sizeof(out)));
    return 0;
}

ZV_API void zv_cache_flush(zv_cache_t *cache)
{
    if (cache != nullptr) {
        cache->cache->flush();
    }
}

ZV_API const char *zv_strerror(int error)
{
    switch (error) {
    case 0:
        return "success";
    case -EINVAL:
        return "invalid argument (NULL pointer, zero length, unknown monitor name, bad limit)";
    case -EOPNOTSUPP:
        return "the requested memory monitor cannot work in this process";
    case -EBUSY:
        return "regions of this cache are still held";
    case -EFAULT:
        return "the memory cannot be registered (not mapped, or not writable for the access)";
    default:
        return (error < 0) ? strerror(-error) : "not an error value of zverbs";
    }
}

} // extern "C"
