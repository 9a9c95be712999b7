// SPDX-License-Identifier: BSD-3-Clause
// UCX's internal headers with C linkage (they have no extern "C" of their own),
// for every layer that uses UCX's base classes (md, iface, glue).
#ifndef ZV_UCX_INTERNAL_H
#define ZV_UCX_INTERNAL_H

#ifdef __cplusplus
extern "C" {
#endif

#include <uct/base/uct_component.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_worker.h>

/* Defined in libuct by UCS_CLASS_DEFINE; not declared in 1.13's headers. */
extern ucs_class_t uct_priv_worker_t_class;

/* The base interface's class initialiser (UCS_CLASS_INIT_FUNC). zverbs
 * objects are not created through UCS_CLASS_NEW, so it is called directly. */
ucs_status_t uct_base_iface_t_init(uct_base_iface_t *self, ucs_class_t *myclass,
                                   int *init_count, uct_iface_ops_t *ops,
                                   uct_iface_internal_ops_t *internal_ops,
                                   uct_md_h md, uct_worker_h worker,
                                   const uct_iface_params_t *params,
                                   const uct_iface_config_t *config);
ucs_status_t uct_base_ep_t_init(uct_base_ep_t *self, ucs_class_t *myclass,
                                int *init_count, uct_base_iface_t *iface);

#ifdef __cplusplus
}
#endif

#endif
