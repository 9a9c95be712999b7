/* SPDX-License-Identifier: BSD-3-Clause */
/* zverbs' registration cache for any verbs program: (address range, access) -> ibv_mr keys,
 * invalidated when the memory behind a registration changes. */
#ifndef ZVERBS_ZVERBS_H_
#define ZVERBS_ZVERBS_H_

/*
 * One cache per protection domain. zv_cache_get() returns a registration
 * covering [addr, addr + length) with at least the requested IBV_ACCESS_*
 * bits; its lkey/rkey go into ibv_sge and RDMA work requests like those of an
 * ibv_mr. zv_cache_put() gives it back. Registrations are kept for reuse and
 * dropped when the memory under them is unmapped, replaced or discarded
 * (munmap, mmap(MAP_FIXED), mremap, madvise(MADV_DONTNEED)...), so a cached
 * key never points at pages the buffer no longer has. This is the same code
 * as the UCX transport's cache (UCX_ZV_RCACHE_*): one copy, linked into both.
 *
 * Link: pkg-config --cflags --libs zverbs    (libzverbs.so.0)
 *
 * Errors: every fallible function returns 0 or a negative errno value
 * (zv_strerror() describes it); nothing here prints, aborts or throws. Set
 * ZVERBS_LOG_LEVEL=error|warn|diag|debug|trace in the environment (read when
 * the library loads; default none) to have the cache log through UCX's logger
 * as well (which also obeys UCX_LOG_LEVEL, default warn: set it too for diag
 * and below).
 *
 * Thread safety: zv_cache_get() and zv_cache_put() may be called from any
 * number of threads on the same cache. A hit takes no lock, makes no system
 * call and writes only to the region it returns; misses, invalidation and
 * eviction run under one mutex of the cache on the calling thread.
 * zv_cache_open()/zv_cache_close() may be called from any thread, but a cache
 * must not be closed while another thread still uses it.
 *
 * Fork: a child never uses its parent's registrations. In a fork child
 * (fork() through libc), the parent's caches bypass themselves from then on:
 * each zv_cache_get() registers for that one use and zv_cache_put()
 * deregisters it; the parent's registrations are never deregistered by the
 * child (the verbs context is the parent's). zv_cache_monitor() then says
 * "fork-bypass". Only fork() through libc is noticed (pthread_atfork). A child
 * may zv_cache_close() the parent's caches; regions the parent held at the
 * fork count as held there (-EBUSY), and nothing of the parent's is
 * deregistered either way.
 *
 * Monitors (zv_cache_params.monitor, the names and default of UCX's
 * UCX_ZV_RCACHE_MONITOR):
 *   "uffd" - the kernel notifier (userfaultfd UNMAP/REMOVE/REMAP events): sees
 *            every change, whoever makes it (raw system calls included);
 *            caches private anonymous memory only, other memory is registered
 *            for each use. One userfaultfd per process can watch a mapping:
 *            caches of this library share one monitor; a process that also
 *            runs the UCX transport's cache has two, and memory watched by
 *            one is registered for each use by the other (correct, uncached).
 *   "ucm"  - UCX's interception (UCM memory events, libucm): sees only the
 *            calls that go through its hooks (not raw system calls).
 *   "none" - no cache: every get registers, every put deregisters.
 *   "auto" - (default, NULL) uffd where the kernel allows it, else ucm, else none.
 * The first cache opened with a monitor creates it (with that cache's
 * event_queue); later caches asking for the same one share it.
 */

#include <infiniband/verbs.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* max_size / max_regions: "auto" (the UCX defaults, see zv_cache_params) and "no limit". */
#define ZV_LIMIT_AUTO ((size_t)-2)
#define ZV_LIMIT_INF  ((size_t)-1)

typedef struct zv_cache  zv_cache_t;   /* one cache on one protection domain */
typedef struct zv_region zv_region_t;  /* one registration held by the caller */

struct zv_cache_params {
    /* sizeof(struct zv_cache_params) as the caller knows it: set by
     * zv_cache_params_init(). Fields added later go after the existing ones
     * and take their defaults when the caller's size does not cover them. */
    size_t      size;
    /* "auto" (NULL), "uffd", "ucm" or "none", case-insensitive. */
    const char *monitor;
    /* Largest total size of idle registered memory kept for reuse (bytes).
     * ZV_LIMIT_AUTO: physical memory / (2 x online CPUs), and at most 3/4 of
     * RLIMIT_MEMLOCK when that is finite (without CAP_IPC_LOCK). */
    size_t      max_size;
    /* Largest number of registrations kept for reuse. ZV_LIMIT_AUTO:
     * min(16384, the device's max_mr / online CPUs). */
    size_t      max_regions;
    /* Capacity of the invalidation queue of the monitor this cache creates
     * (rounded up to a power of two; 0: 4096). */
    size_t      event_queue;
    /* Nonzero: register with on-demand paging, bypassing the cache, where the
     * device supports it for the requested access (default 1, as
     * UCX_ZV_RCACHE_ODP=try). */
    int         odp;
    /* Name of the cache in logs (NULL: the device's name). */
    const char *name;
};

/* Counters since zv_cache_open(), and the limits in force. */
struct zv_cache_stats {
    uint64_t misses;          /* gets that took the locked path */
    uint64_t registrations;   /* successful ibv_reg_mr calls */
    uint64_t deregistrations;
    uint64_t evictions;       /* idle registrations dropped for the limits */
    uint64_t invalidations;   /* registrations dropped because their memory changed */
    uint64_t flushes;         /* "drop everything" (lost events, fork, monitor failure) */
    uint64_t reg_retries;     /* registrations retried after evicting idle ones */
    uint64_t uncached;        /* registrations made for one use only */
    uint64_t cached_regions;
    uint64_t cached_bytes;
    uint64_t max_regions;     /* limits after resolving ZV_LIMIT_AUTO */
    uint64_t max_size;
};

/* Fills params with the defaults (monitor "auto", limits ZV_LIMIT_AUTO, odp 1)
 * and params->size. */
void zv_cache_params_init(struct zv_cache_params *params);

/* Opens a cache on pd (which must outlive it); params NULL: defaults.
 * Returns 0 and *cache_p, or:
 *   -EINVAL      pd or cache_p NULL, params->size too small, unknown monitor name;
 *   -EOPNOTSUPP  the monitor asked for explicitly cannot work here (e.g. "uffd"
 *                with userfaultfd disabled, "ucm" with UCX_MEM_EVENTS=no);
 *   -ENOMEM, -EIO (the device could not be queried). */
int zv_cache_open(struct ibv_pd *pd, const struct zv_cache_params *params,
                  zv_cache_t **cache_p);

/* Closes a cache: deregisters every idle registration. Returns -EBUSY, and
 * leaves the cache open and usable, while the caller still holds regions
 * (zv_cache_put() them, then close again); -EINVAL for NULL; else 0. */
int zv_cache_close(zv_cache_t *cache);

/* A registration covering [addr, addr + length) with at least the access bits
 * (IBV_ACCESS_*), holding one reference for the caller until zv_cache_put().
 * The region may cover more than asked (page-rounded, or a larger cached
 * registration). Returns 0 and *region_p, or -EINVAL (NULL arguments,
 * length 0), -ENOMEM, -EFAULT/-EIO (the memory cannot be registered). */
int zv_cache_get(zv_cache_t *cache, void *addr, size_t length, unsigned access,
                 zv_region_t **region_p);

/* Gives back a region from zv_cache_get() on the same cache. A region whose
 * memory changed while held is deregistered here, by its last holder. */
void zv_cache_put(zv_cache_t *cache, zv_region_t *region);

/* The keys and range of a held region (valid until zv_cache_put()). */
uint32_t zv_region_lkey(const zv_region_t *region);
uint32_t zv_region_rkey(const zv_region_t *region);
/* First byte and length of what is registered (covers the requested range). */
void    *zv_region_addr(const zv_region_t *region);
size_t   zv_region_length(const zv_region_t *region);
/* IBV_ACCESS_* bits of the registration (at least those requested). */
unsigned zv_region_access(const zv_region_t *region);

/* Which path serves this cache: "uffd", "ucm", "none" (no caching) or
 * "fork-bypass" (in a fork child). Never NULL. */
const char *zv_cache_monitor(zv_cache_t *cache);

/* Copies the counters into *stats; size: sizeof(struct zv_cache_stats) as the
 * caller knows it (fields beyond it are not written). Returns 0 or -EINVAL. */
int zv_cache_read_stats(zv_cache_t *cache, struct zv_cache_stats *stats, size_t size);

/* Deregisters every idle registration now (e.g. before handing memory back
 * to the system in bulk). Held regions stay valid and are released at put. */
void zv_cache_flush(zv_cache_t *cache);

/* Text for a value returned by this library (negative errno), never NULL. */
const char *zv_strerror(int error);

#ifdef __cplusplus
}
#endif

#endif
