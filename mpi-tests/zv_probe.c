/* SPDX-License-Identifier: BSD-3-Clause */
/* After MPI_Init, report whether UCX's UCT layer has the zv component and
 * its transports: proves the module was brought in (Open MPI component or
 * LD_PRELOAD). Exit 0 if zv and rc_zv are registered, 1 otherwise.
 * Also prints the registration cache settings zv's memory domains will be
 * opened with, as UCX's parser reads them (UCX_ZV_RCACHE_*): the Open MPI
 * component's MCA parameters must arrive there. */
#include <mpi.h>
#include <uct/api/uct.h>

#include <stdio.h>
#include <string.h>

static void print_cache_config(int rank, uct_component_h component)
{
    static const char *const names[] = {"RCACHE_MONITOR", "RCACHE_MAX_SIZE",
                                        "RCACHE_MAX_REGIONS"};
    uct_md_config_t *config;
    char value[64];
    unsigned i;

    if (uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) {
        printf("rank %d: cannot read zv's md configuration\n", rank);
        return;
    }
    for (i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        if (uct_config_get(config, names[i], value, sizeof(value)) == UCS_OK) {
            printf("rank %d: UCX_ZV_%s=%s\n", rank, names[i], value);
        }
    }
    uct_config_release(config);
}

int main(int argc, char **argv)
{
    uct_component_h *components;
    unsigned num_components, i;
    int rank, found = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    if (uct_query_components(&components, &num_components) != UCS_OK) {
        fprintf(stderr, "uct_query_components failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (i = 0; i < num_components; ++i) {
        uct_component_attr_t attr;
        memset(&attr, 0, sizeof(attr));
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(components[i], &attr) != UCS_OK) {
            continue;
        }
        if (strcmp(attr.name, "zv") == 0) {
            found = 1;
            printf("rank %d: UCT component zv registered, %u memory domain(s)\n",
                   rank, attr.md_resource_count);
            print_cache_config(rank, components[i]);
        }
    }
    uct_release_component_list(components);
    if (!found) {
        printf("rank %d: UCT component zv NOT registered\n", rank);
    }
    MPI_Finalize();
    return found ? 0 : 1;
}
