/* SPDX-License-Identifier: BSD-3-Clause */
/* The registration cache's settings as users read them: monitor names,
 * defaults and help texts, in C. The one source of the module's UCX config
 * table (through rcache/config.h and monitor/kind.cc), of the Open MPI
 * component's MCA parameters (src/ompi/rcache_zverbs.c, which is C) and of
 * the README's table of those (contrib/gen-mca-doc.sh). String literals
 * only: each user joins them at compile time. */
#ifndef ZV_UTIL_TEXT_H_
#define ZV_UTIL_TEXT_H_

/* Helpers for the lists below: X(name, what) as the name alone, or as
 * "name - what"; ZV_TEXT_COMMA as sep makes array elements. */
#define ZV_TEXT_NAME(name, what) name
#define ZV_TEXT_ITEM(name, what) name " - " what
#define ZV_TEXT_COMMA ,

/* The invalidation sources, in the order of zv::monitor::monitor_kind:
 * X(name, what it is), separated by sep. */
#define ZV_RCACHE_MONITORS(X, sep)                                                   \
    X("none", "no cache: every registration is real and released at "              \
              "deregistration.") sep                                                 \
    X("uffd", "the kernel notifier (userfaultfd UNMAP/REMOVE/REMAP events); sees "  \
              "every change to the page tables, whoever makes it; private "         \
              "anonymous memory only, other memory is registered for each use.") sep \
    X("ucm", "the intercept (UCM memory events): sees only calls that go through "  \
             "its hooks.") sep                                                       \
    X("auto", "uffd where the kernel allows it, else ucm, else none.")
#define ZV_RCACHE_MONITOR_SYNTAX "one of: " ZV_RCACHE_MONITORS(ZV_TEXT_NAME, ", ")
#define ZV_RCACHE_MONITOR_DEFAULT "auto"
/* sep: what comes before each source's line ("\n " for ucx_info). */
#define ZV_RCACHE_MONITOR_DOC(sep)                                                   \
    "Source of memory-change events for the registration cache, chosen once per "   \
    "process, by the first zv memory domain opened (a later one that asks for "     \
    "another is warned and shares it):" sep ZV_RCACHE_MONITORS(ZV_TEXT_ITEM, sep)

/* How the uffd monitor registers ranges, in the order of
 * zv::monitor::uffd_mode. */
#define ZV_RCACHE_UFFD_MODES(X, sep)                                                 \
    X("auto", "wp when available") sep                                               \
    X("wp", "no page faults reach the monitor") sep                                  \
    X("missing", "first touches are resolved with zero pages; kernels before 5.7")
#define ZV_TEXT_PAREN(name, what) name " (" what ")"
#define ZV_RCACHE_UFFD_MODE_SYNTAX "one of: " ZV_RCACHE_UFFD_MODES(ZV_TEXT_NAME, ", ")
#define ZV_RCACHE_UFFD_MODE_DEFAULT "auto"
#define ZV_RCACHE_UFFD_MODE_DOC                                                      \
    "How the uffd monitor registers ranges: " ZV_RCACHE_UFFD_MODES(ZV_TEXT_PAREN, ", ") "."

#define ZV_RCACHE_SIZE_SYNTAX "<number>[b|k|kb|m|mb|g|gb], inf or auto"
#define ZV_RCACHE_COUNT_SYNTAX "<number>, inf or auto"

#define ZV_RCACHE_MAX_SIZE_DEFAULT "auto"
#define ZV_RCACHE_MAX_SIZE_DOC                                                       \
    "Largest total size of registered memory the cache keeps for reuse. Idle "      \
    "regions are evicted least-recently-used first beyond it. \"auto\" is "         \
    "physical memory / (2 x online CPUs), and at most 3/4 of RLIMIT_MEMLOCK when "  \
    "that is finite: with one process per core, idle cached registrations of all "  \
    "of them together pin at most half of the node's memory."

#define ZV_RCACHE_MAX_REGIONS_DEFAULT "auto"
#define ZV_RCACHE_MAX_REGIONS_DOC                                                    \
    "Largest number of registrations the cache keeps for reuse. \"auto\" is "       \
    "min(16384, the device's max_mr / online CPUs), so one process per core "       \
    "cannot exhaust the HCA's memory-region resources."

#define ZV_RCACHE_EVENT_QUEUE_DEFAULT "4096"
#define ZV_RCACHE_EVENT_QUEUE_DOC                                                    \
    "Capacity of the invalidation queue between the monitor and the caches. A "     \
    "cache that falls further behind drops all its idle regions instead of "        \
    "reading the lost events."

#define ZV_RCACHE_ODP_DEFAULT "try"
#define ZV_RCACHE_ODP_DOC                                                            \
    "Register with on-demand paging, bypassing the cache, where the device "        \
    "supports it for the requested access."

/* ---- The Open MPI component's parameters, rcache_zverbs_<name>. */

#define ZV_MCA_ENABLE_DEFAULT 1
#define ZV_MCA_ENABLE_HELP                                                           \
    "Load the zverbs UCT module (libuct_zv) into each process so that UCX (pml "    \
    "ucx, osc ucx) can use the rc_zv/ud_zv/uc_zv transports without LD_PRELOAD"
#define ZV_MCA_MODULE_HELP "Path of the zverbs UCT module to load"

/* The cache's settings the component exports as their UCX_ZV_* variables:
 * X(name, UCX variable, syntax kind (NAME, MEMUNITS, COUNT), default,
 * syntax, documentation). */
#define ZV_MCA_CACHE_PARAMS(X)                                                       \
    X("monitor", "UCX_ZV_RCACHE_MONITOR", NAME, ZV_RCACHE_MONITOR_DEFAULT,          \
      ZV_RCACHE_MONITOR_SYNTAX, ZV_RCACHE_MONITOR_DOC(" "))                          \
    X("max_size", "UCX_ZV_RCACHE_MAX_SIZE", MEMUNITS, ZV_RCACHE_MAX_SIZE_DEFAULT,   \
      ZV_RCACHE_SIZE_SYNTAX, ZV_RCACHE_MAX_SIZE_DOC)                                 \
    X("max_regions", "UCX_ZV_RCACHE_MAX_REGIONS", COUNT,                            \
      ZV_RCACHE_MAX_REGIONS_DEFAULT, ZV_RCACHE_COUNT_SYNTAX, ZV_RCACHE_MAX_REGIONS_DOC)
/* Such a parameter's help, as ompi_info shows it. */
#define ZV_MCA_CACHE_HELP(var, syntax, doc)                                          \
    doc " Syntax: " syntax ". Exported as " var "; that variable, when set, wins."

#endif
