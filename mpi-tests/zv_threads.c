/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI_THREAD_MULTIPLE: T threads per rank send and receive at once, each
 * from buffers it allocates afresh every message (so registrations happen
 * on every thread concurrently), sizes crossing eager and rendezvous;
 * every byte is checked.
 *
 * usage: zv_threads [-T THREADS] [-S MAX] [-i ITERS]
 *   -T  threads per rank (default 4)
 *   -S  largest message in bytes (default 1 MiB): sizes 1, 64, 4 KiB ...
 *       up to it, multiplying by 16
 *   -i  rounds over all sizes (default 20)
 * Two ranks. Thread t of rank 0 exchanges with thread t of rank 1 on tag t
 * (each thread sends one message and receives one per size and round).
 * Prints "threads T messages N errors E"; exits 1 on any data error, 2 when
 * the library grants less than MPI_THREAD_MULTIPLE.
 */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int    g_rank, g_iters = 20;
static size_t g_max = 1 << 20;

struct worker {
    pthread_t     th;
    int           id;
    unsigned long msgs, errors;
};

static unsigned char pattern(size_t i, int from, int t, unsigned round, size_t len)
{
    return (unsigned char)((i * 131u + (unsigned)from * 17u + (unsigned)t * 53u + round * 7u +
                            (unsigned)len + (i >> 10)) & 0xffu);
}

static void *run(void *arg)
{
    struct worker *w = (struct worker *)arg;
    const int peer   = 1 - g_rank;
    unsigned round;
    size_t len;
    for (round = 0; round < (unsigned)g_iters; ++round) {
        for (len = 1; len <= g_max; len = (len == 1) ? 64 : len * 16) {
            /* Fresh buffers per message: malloc hands back recycled
             * addresses (and munmaps large ones), which the cache must
             * notice while the other threads register too. */
            unsigned char *s = malloc(len), *r = malloc(len);
            MPI_Request req[2];
            size_t i;
            if ((s == NULL) || (r == NULL)) {
                fprintf(stderr, "out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            for (i = 0; i < len; ++i) s[i] = pattern(i, g_rank, w->id, round, len);
            memset(r, 0xee, len);
            MPI_Irecv(r, (int)len, MPI_BYTE, peer, w->id, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(s, (int)len, MPI_BYTE, peer, w->id, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            for (i = 0; i < len; ++i) {
                if (r[i] != pattern(i, peer, w->id, round, len)) {
                    if (w->errors++ < 3) {
                        fprintf(stderr, "rank %d thread %d: round %u size %zu byte %zu: "
                                "got 0x%02x, want 0x%02x\n", g_rank, w->id, round, len, i,
                                r[i], pattern(i, peer, w->id, round, len));
                    }
                    break;
                }
            }
            ++w->msgs;
            free(s);
            free(r);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size, nthreads = 4, opt, t;
    unsigned long msgs = 0, errors = 0, all[2];
    struct worker *w;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "T:S:i:")) != -1) {
        switch (opt) {
        case 'T': nthreads = atoi(optarg); break;
        case 'S': g_max = strtoul(optarg, NULL, 0); break;
        case 'i': g_iters = atoi(optarg); break;
        default:
            if (g_rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0) fprintf(stderr, "MPI_THREAD_MULTIPLE not provided (got %d)\n", provided);
        MPI_Finalize();
        return 2;
    }
    if ((size != 2) || (nthreads < 1) || (nthreads > 64) || (g_iters < 1) || (g_max < 1)) {
        if (g_rank == 0) fprintf(stderr, "needs 2 ranks, 1..64 threads, -i >= 1, -S >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    w = calloc((size_t)nthreads, sizeof(*w));
    for (t = 0; t < nthreads; ++t) {
        w[t].id = t;
        if (pthread_create(&w[t].th, NULL, run, &w[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (t = 0; t < nthreads; ++t) {
        pthread_join(w[t].th, NULL);
        msgs += w[t].msgs;
        errors += w[t].errors;
    }
    all[0] = msgs;
    all[1] = errors;
    MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("threads %d messages %lu errors %lu\n", nthreads, all[0], all[1]);
    }
    free(w);
    MPI_Finalize();
    return (all[1] == 0) ? 0 : 1;
}
