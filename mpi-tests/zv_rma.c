/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI one-sided communication with data validated on every iteration:
 * put, get and accumulate (MPI_INT sum) to the right-hand neighbour, on a
 * window over ordinary malloc'd memory (MPI_Win_create, no MPI_Alloc_mem).
 *
 * usage: zv_rma [-t put|get|acc|all] [-m fence|lock] [-s MIN] [-S MAX] [-i ITERS]
 *               [-q]
 *   -t all runs the three one after the other
 *   -m  synchronisation: fence epochs (active target), or one lock_all
 *       epoch with MPI_Win_flush after each operation (passive target)
 *   -s/-S  smallest and largest size in bytes, powers of 2 between
 *   -i  iterations at small sizes (fewer at large sizes, at least 3)
 * Any number of ranks >= 2 (each rank targets rank+1). Prints
 * "size  usec  errors" (usec: the slowest rank's mean time of one operation
 * with its synchronisation); exits 1 on any data error.
 *
 * put/acc alternate between two halves of the target window: the target
 * checks (and, for acc, zeroes) half i%2 after iteration i's epoch ends,
 * and no one writes that half again before the next epoch boundary.
 * get reads at a varying offset from a window filled with a pattern that
 * depends on the owner and the offset.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t i, unsigned a, unsigned b)
{
    return (unsigned char)((i * 197u + a * 31u + b * 11u + (i >> 10)) & 0xffu);
}

static unsigned long check(const unsigned char *p, size_t len, size_t off, unsigned a, unsigned b)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        if (p[i] != pattern(i + off, a, b)) return 1;
    }
    return 0;
}

static int elem(size_t j, int r, unsigned it)
{
    return (int)((j * 17u + (unsigned)r * 5u + it * 3u) & 0xfffffu);
}

/* Everything one sweep needs. */
struct rma {
    MPI_Win win;
    unsigned char *win_mem, *obuf;
    size_t max;
    int iters, lock, rank, nranks, right, left;
    unsigned it;
};

/* The sweep of one operation; returns the wrong results of all ranks. */
static unsigned long sweep(struct rma *x, const char *test, size_t min, int quiet)
{
    MPI_Win win = x->win;
    unsigned char *win_mem = x->win_mem, *obuf = x->obuf;
    size_t max = x->max, size, i;
    int iters = x->iters, lock = x->lock, rank = x->rank, right = x->right, left = x->left;
    unsigned long total = 0;
    if (!strcmp(test, "acc") && (min < sizeof(int))) min = sizeof(int);
    if ((rank == 0) && !quiet) {
        printf("# zv_rma %s (%s), %d ranks: size  usec  errors\n", test, lock ? "lock" : "fence",
               x->nranks);
    }
    for (size = min; size <= max; size *= 2) {
        int n = iters, k;
        size_t cnt = size / sizeof(int);
        double t0, dt = 0, dt_max = 0;
        unsigned long bad = 0, bad_all = 0;
        if (size > 8192) n = (int)((size_t)iters * 8192 / size);
        if (n < 3) n = 3;
        if (!strcmp(test, "get")) {           /* what the neighbours will read */
            for (i = 0; i < 2 * max; ++i) win_mem[i] = pattern(i, (unsigned)rank, (unsigned)size);
        } else {
            memset(win_mem, 0, 2 * max);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (lock) {
            MPI_Win_lock_all(0, win);
        } else {
            MPI_Win_fence(0, win);
        }
        for (k = 0; k < n + 1; ++k) {          /* k = 0 is a warm-up */
            size_t half = (size_t)(k % 2) * max;
            unsigned it;
            size_t off = ((size_t)k * 64) % (max - size + 1) + (size_t)(k % 2) * max;
            it = ++x->it;
            if (!strcmp(test, "put")) {
                for (i = 0; i < size; ++i) obuf[i] = pattern(i, (unsigned)rank, it);
            } else if (!strcmp(test, "acc")) {
                for (i = 0; i < cnt; ++i) ((int *)obuf)[i] = elem(i, rank, it);
            } else {
                memset(obuf, 0, size);
            }
            t0 = MPI_Wtime();
            if (!strcmp(test, "put")) {
                MPI_Put(obuf, (int)size, MPI_BYTE, right, (MPI_Aint)half, (int)size, MPI_BYTE, win);
            } else if (!strcmp(test, "acc")) {
                MPI_Accumulate(obuf, (int)cnt, MPI_INT, right, (MPI_Aint)half, (int)cnt, MPI_INT,
                               MPI_SUM, win);
            } else {
                MPI_Get(obuf, (int)size, MPI_BYTE, right, (MPI_Aint)off, (int)size, MPI_BYTE, win);
            }
            if (lock) {
                MPI_Win_flush(right, win);
                if (k > 0) dt += MPI_Wtime() - t0;
                MPI_Barrier(MPI_COMM_WORLD);   /* every origin's data is in place */
                MPI_Win_sync(win);
            } else {
                MPI_Win_fence(0, win);
                if (k > 0) dt += MPI_Wtime() - t0;
            }
            if (!strcmp(test, "put")) {
                bad += check(win_mem + half, size, 0, (unsigned)left, it);
            } else if (!strcmp(test, "acc")) {
                int *w = (int *)(win_mem + half);
                for (i = 0; i < cnt; ++i) {
                    if (w[i] != elem(i, left, it)) {
                        ++bad;
                        break;
                    }
                }
                memset(w, 0, cnt * sizeof(int));
            } else {
                bad += check(obuf, size, off, (unsigned)right, (unsigned)size);
            }
            if (lock) {
                MPI_Win_sync(win);
                MPI_Barrier(MPI_COMM_WORLD);   /* checked before anyone writes again */
            }
        }
        if (lock) {
            MPI_Win_unlock_all(win);
        } else {
            MPI_Win_fence(0, win);
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
    static const char *all[] = {"put", "get", "acc"};
    const char *test = "put", *mode = "fence";
    size_t min = 1, max = 1u << 20;
    int iters = 100, quiet = 0, opt, rank, nranks, t;
    unsigned long total = 0;
    struct rma x;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "t:m:s:S:i:q")) != -1) {
        switch (opt) {
        case 't': test = optarg; break;
        case 'm': mode = optarg; break;
        case 's': min = strtoul(optarg, NULL, 0); break;
        case 'S': max = strtoul(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'q': quiet = 1; break;
        default:
            if (rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((nranks < 2) || (min == 0) || (max < min) || (max < sizeof(int)) || (iters < 1) ||
        (max > (1u << 30)) ||
        (strcmp(test, "put") && strcmp(test, "get") && strcmp(test, "acc") && strcmp(test, "all")) ||
        (strcmp(mode, "fence") && strcmp(mode, "lock"))) {
        if (rank == 0) {
            fprintf(stderr, "usage: >= 2 ranks; -t put|get|acc|all, -m fence|lock, 0 < -s <= -S\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    x.lock = !strcmp(mode, "lock");
    x.rank = rank;
    x.nranks = nranks;
    x.right = (rank + 1) % nranks;
    x.left = (rank + nranks - 1) % nranks;
    x.max = max;
    x.iters = iters;
    x.it = 0;
    x.win_mem = malloc(2 * max);
    x.obuf = malloc(2 * max);
    if ((x.win_mem == NULL) || (x.obuf == NULL)) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(x.win_mem, 0, 2 * max);
    MPI_Win_create(x.win_mem, (MPI_Aint)(2 * max), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &x.win);
    for (t = 0; t < 3; ++t) {
        if (!strcmp(test, "all") || !strcmp(test, all[t])) {
            total += sweep(&x, all[t], min, quiet);
        }
    }
    MPI_Win_free(&x.win);
    if ((rank == 0) && total) {
        fprintf(stderr, "zv_rma: %lu operation(s) left wrong data\n", total);
    }
    free(x.win_mem);
    free(x.obuf);
    MPI_Finalize();
    return total ? 1 : 0;
}
