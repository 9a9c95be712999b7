/* SPDX-License-Identifier: BSD-3-Clause */
/* Collectives with data validated on every rank and every iteration:
 * allreduce (MPI_INT sum), alltoall (a distinct block per sender and
 * receiver) and bcast (the root changes every iteration).
 *
 * usage: zv_coll [-t allreduce|alltoall|bcast|all] [-s MIN] [-S MAX] [-i ITERS]
 *                [-F] [-q]
 *   -s/-S  smallest and largest size in bytes, powers of 2 between
 *          (allreduce: whole vector, at least 4 B; alltoall: per peer)
 *   -i     iterations at small sizes (fewer at large sizes, at least 3)
 *   -t all runs the three one after the other
 *   -F     fresh buffers every iteration (malloc/free, exercises the cache)
 * Any number of ranks. Prints "size  usec  errors" (usec: the slowest rank's
 * mean time per call); exits 1 on any data error.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t i, unsigned a, unsigned b)
{
    return (unsigned char)((i * 151u + a * 29u + b * 7u + (i >> 9)) & 0xffu);
}

static void fill(unsigned char *p, size_t len, unsigned a, unsigned b)
{
    size_t i;
    for (i = 0; i < len; ++i) p[i] = pattern(i, a, b);
}

static unsigned long check(const unsigned char *p, size_t len, unsigned a, unsigned b)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        if (p[i] != pattern(i, a, b)) return 1;
    }
    return 0;
}

/* allreduce element j of rank r in iteration it: small enough that the sum
 * over any sane number of ranks fits an int */
static int elem(size_t j, int r, unsigned it)
{
    return (int)((j * 13u + (unsigned)r * 101u + it * 7u) & 0xffffu);
}

static void *xmalloc(size_t len)
{
    void *p = malloc(len ? len : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", len);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* One call of the collective, with its data set up before and checked
 * after; returns the number of bad blocks seen by this rank. */
static unsigned long one(const char *test, size_t size, unsigned it, int rank, int nranks,
                         unsigned char *sbuf, unsigned char *rbuf, double *dt)
{
    unsigned long bad = 0;
    double t0;
    int r;
    if (!strcmp(test, "allreduce")) {
        size_t j, cnt = size / sizeof(int);
        int *s = (int *)sbuf, *d = (int *)rbuf;
        for (j = 0; j < cnt; ++j) s[j] = elem(j, rank, it);
        memset(d, 0, cnt * sizeof(int));
        t0 = MPI_Wtime();
        MPI_Allreduce(s, d, (int)cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        *dt += MPI_Wtime() - t0;
        for (j = 0; j < cnt; ++j) {
            int want = 0;
            for (r = 0; r < nranks; ++r) want += elem(j, r, it);
            if (d[j] != want) {
                ++bad;
                break;
            }
        }
    } else if (!strcmp(test, "alltoall")) {
        for (r = 0; r < nranks; ++r) fill(sbuf + (size_t)r * size, size, it * 64u + (unsigned)rank, (unsigned)r);
        memset(rbuf, 0, size * (size_t)nranks);
        t0 = MPI_Wtime();
        MPI_Alltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD);
        *dt += MPI_Wtime() - t0;
        for (r = 0; r < nranks; ++r) {
            bad += check(rbuf + (size_t)r * size, size, it * 64u + (unsigned)r, (unsigned)rank);
        }
    } else { /* bcast: the root rotates */
        int root = (int)(it % (unsigned)nranks);
        if (rank == root) {
            fill(sbuf, size, it, (unsigned)root);
        } else {
            memset(sbuf, 0, size);
        }
        t0 = MPI_Wtime();
        MPI_Bcast(sbuf, (int)size, MPI_BYTE, root, MPI_COMM_WORLD);
        *dt += MPI_Wtime() - t0;
        bad += check(sbuf, size, it, (unsigned)root);
    }
    return bad;
}

/* The sweep of one collective; returns the corrupted blocks of all ranks. */
static unsigned long sweep(const char *test, size_t min, size_t max, int iters, int fresh,
                           int quiet, int rank, int nranks, unsigned char *sbuf,
                           unsigned char *rbuf)
{
    static unsigned it;
    unsigned long total = 0;
    size_t size;
    if (!strcmp(test, "allreduce") && (min < sizeof(int))) min = sizeof(int);
    if ((rank == 0) && !quiet) {
        printf("# zv_coll %s%s, %d ranks: size  usec  errors\n", test,
               fresh ? " (fresh buffers)" : "", nranks);
    }
    for (size = min; size <= max; size *= 2) {
        int n = iters, i;
        double dt = 0, dt_max = 0;
        unsigned long bad = 0, bad_all = 0;
        if (size > 8192) n = (int)((size_t)iters * 8192 / size);
        if (n < 3) n = 3;
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < n + 1; ++i) {   /* the first call is a warm-up */
            double d = 0;
            unsigned char *s = sbuf, *r = rbuf;
            size_t len = strcmp(test, "alltoall") ? size : size * (size_t)nranks;
            if (fresh) {
                s = xmalloc(len);
                r = xmalloc(len);
            }
            bad += one(test, size, ++it, rank, nranks, s, r, &d);
            if (i > 0) dt += d;
            if (fresh) {
                free(s);
                free(r);
            }
        }
        MPI_Allreduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%zu %.2f %lu\n", size, dt_max * 1e6 / n, bad_all);
            fflush(stdout);
        }
        total += bad_all;
        if (size > max / 2) break;
    }
    return total;
}

int main(int argc, char **argv)
{
    static const char *all[] = {"allreduce", "alltoall", "bcast"};
    const char *test = "allreduce";
    size_t min = 1, max = 1u << 20;
    int iters = 100, fresh = 0, quiet = 0, opt, rank, nranks, t;
    unsigned long total = 0;
    unsigned char *sbuf, *rbuf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "t:s:S:i:Fq")) != -1) {
        switch (opt) {
        case 't': test = optarg; break;
        case 's': min = strtoul(optarg, NULL, 0); break;
        case 'S': max = strtoul(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'F': fresh = 1; break;
        case 'q': quiet = 1; break;
        default:
            if (rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((min == 0) || (max < min) || (max < sizeof(int)) || (iters < 1) ||
        (max > (1u << 30) / (unsigned)nranks) ||
        (strcmp(test, "allreduce") && strcmp(test, "alltoall") && strcmp(test, "bcast") &&
         strcmp(test, "all"))) {
        if (rank == 0) {
            fprintf(stderr, "usage: -t allreduce|alltoall|bcast|all, 0 < -s <= -S <= 1 GiB / ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sbuf = xmalloc(max * (size_t)nranks);
    rbuf = xmalloc(max * (size_t)nranks);
    for (t = 0; t < 3; ++t) {
        if (!strcmp(test, "all") || !strcmp(test, all[t])) {
            total += sweep(all[t], min, max, iters, fresh, quiet, rank, nranks, sbuf, rbuf);
        }
    }
    if ((rank == 0) && total) {
        fprintf(stderr, "zv_coll: %lu block(s) arrived corrupted\n", total);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return total ? 1 : 0;
}
