/* SPDX-License-Identifier: BSD-3-Clause */
/* Compare UCX struct sizes seen at compile time with the loaded libuct's. */
#ifndef ZV_GLUE_LAYOUT_CHECK_H
#define ZV_GLUE_LAYOUT_CHECK_H

/*
 * zverbs embeds UCX's internal base structs (uct_base_iface_t, ...) in its
 * own objects. Their layout comes from the UCX headers we compiled against;
 * the code that initialises them lives in the libuct that is loaded. If the
 * two disagree (other UCX version, ENABLE_STATS, ...) every write through
 * the base struct corrupts memory. libuct exports one ucs_class_t per class
 * whose 'size' field is sizeof() as libuct saw it: compare with ours.
 *
 * Used twice: by configure (a run test) and by the module constructor,
 * which refuses to register on a mismatch. Header-only so both can use it.
 */

#include "ucx/internal.h"

#include <stdio.h>
#include <stddef.h>

/* Test hook: a build with -DZV_LAYOUT_TEST_SKEW=N pretends that our view
 * of uct_base_iface_t is N bytes larger (see test/unit/layout_test.sh). */
#ifndef ZV_LAYOUT_TEST_SKEW
#define ZV_LAYOUT_TEST_SKEW 0
#endif

struct zv_layout_entry {
    const char        *name;
    size_t             compiled;
    const ucs_class_t *loaded;
};

/* Returns the number of mismatches; describes them in msg. */
static inline int zv_layout_check_entries(const struct zv_layout_entry *e,
                                          int count, char *msg, size_t len)
{
    int mismatches = 0;
    size_t off     = 0;
    int i, n;

    if (len > 0) {
        msg[0] = '\0';
    }
    for (i = 0; i < count; ++i) {
        if (e[i].compiled == e[i].loaded->size) {
            continue;
        }
        ++mismatches;
        if (off < len) {
            n = snprintf(msg + off, len - off,
                         "%ssizeof(%s) is %zu in the headers but %zu in libuct",
                         (off > 0) ? "; " : "", e[i].name, e[i].compiled,
                         e[i].loaded->size);
            off += (n > 0) ? (size_t)n : 0;
        }
    }
    return mismatches;
}

static inline int zv_layout_check_builtin(char *msg, size_t len)
{
    const struct zv_layout_entry entries[] = {
        {"uct_base_iface_t", sizeof(uct_base_iface_t) + ZV_LAYOUT_TEST_SKEW,
         &uct_base_iface_t_class},
        {"uct_base_ep_t", sizeof(uct_base_ep_t), &uct_base_ep_t_class},
        {"uct_priv_worker_t", sizeof(uct_priv_worker_t),
         &uct_priv_worker_t_class},
    };
    return zv_layout_check_entries(entries,
                                   (int)(sizeof(entries) / sizeof(entries[0])),
                                   msg, len);
}

#endif
