/* SPDX-License-Identifier: BSD-3-Clause */
/* Fill a device's memory-region table, for the full-MR-table test.
 *
 * usage: zv_mr_hog DEVICE FREE
 * Registers one page again and again until ibv_reg_mr() fails, then
 * releases FREE of those registrations, so that other processes find the
 * table all but full. Prints
 *   "mr_hog: holding N, FREE left free (ibv_reg_mr failed after M: ERR)"
 * and keeps the rest until it is killed (the kernel releases them then).
 * After SIGUSR1 it also takes every entry that becomes free (it tries again
 * every millisecond), printing "mr_hog: grabbing": the table stays full
 * whoever releases an entry. SIGUSR2 releases what it grabbed (back to
 * FREE free entries, "mr_hog: released") and stops grabbing.
 * Exit 1 when the table did not fill (no failure within 4 M registrations),
 * 2 on a usage or device error. */
#include <infiniband/verbs.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t grab;

static void on_signal(int sig)
{
    grab = (sig == SIGUSR1);
}

int main(int argc, char **argv)
{
    struct ibv_device **list;
    struct ibv_context *ctx = NULL;
    struct ibv_pd *pd;
    struct ibv_mr **mrs;
    const size_t cap = 4u << 20;
    size_t n = 0, keep_free, i, base;
    int num, err = 0;
    char *page;

    if (argc != 3) {
        fprintf(stderr, "usage: zv_mr_hog DEVICE FREE\n");
        return 2;
    }
    keep_free = strtoul(argv[2], NULL, 0);
    list      = ibv_get_device_list(&num);
    for (i = 0; (list != NULL) && (i < (size_t)num); ++i) {
        if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    if ((ctx == NULL) || ((pd = ibv_alloc_pd(ctx)) == NULL)) {
        fprintf(stderr, "mr_hog: cannot open %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    signal(SIGUSR1, on_signal);
    signal(SIGUSR2, on_signal);
    mrs  = calloc(cap, sizeof(*mrs));
    page = aligned_alloc(4096, 4096);
    if ((mrs == NULL) || (page == NULL)) {
        fprintf(stderr, "mr_hog: out of memory\n");
        return 2;
    }
    while (n < cap) {
        mrs[n] = ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
        if (mrs[n] == NULL) {
            err = errno;
            break;
        }
        if ((++n % 65536) == 0) {
            fprintf(stderr, "mr_hog: %zu registered\n", n);
        }
    }
    if (n == cap) {
        fprintf(stderr, "mr_hog: %zu registrations and the table is not full\n", n);
        return 1;
    }
    for (i = 0; (i < keep_free) && (n > 0); ++i) {
        ibv_dereg_mr(mrs[--n]);
    }
    printf("mr_hog: holding %zu, %zu left free (ibv_reg_mr failed after %zu: %s)\n", n, i,
           n + i, strerror(err));
    fflush(stdout);
    base = n;
    for (;;) {
        while (!grab) {
            pause();
        }
        printf("mr_hog: grabbing\n");
        fflush(stdout);
        while (grab) {
            if (n < cap) {
                mrs[n] = ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
                if (mrs[n] != NULL) {
                    ++n;
                    continue;
                }
            }
            usleep(1000);
        }
        printf("mr_hog: released %zu grabbed\n", n - base);
        fflush(stdout);
        while (n > base) {
            ibv_dereg_mr(mrs[--n]);
        }
    }
}
