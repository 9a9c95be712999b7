/* SPDX-License-Identifier: BSD-3-Clause */
/* Soak: mixed traffic for a given time, every byte checked, resident memory
 * watched. Each round both ranks exchange a message of a pseudo-random size
 * (1 B .. MAX, the same sequence on both ranks), from a buffer that is
 * reused or freshly allocated; every 8th round an allreduce; with -r every
 * 16th round a one-sided put and get (passive target) into a window.
 *
 * usage: zv_soak [-d SECONDS] [-S MAX] [-r] [-g GROWTH_MIB]
 *   -d  how long (default 60)
 *   -S  largest message (default 1 MiB)
 *   -r  one-sided traffic too (needs an osc component, e.g. --mca osc ucx)
 *   -g  largest growth of resident memory allowed between the end of the
 *       first tenth of the run and the end, in MiB (default 64)
 * Two ranks. Prints one line per rank 0:
 *   "soak: S s, R rounds, B bytes, E errors, rss KiB start A end Z max M"
 * and exits 1 on any data error or on growth beyond -g (on either rank).
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    }
    fclose(f);
    return kib;
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned char pat(size_t i, int from, unsigned long round)
{
    return (unsigned char)((i * 197u + (unsigned)from * 31u + round * 11u + (i >> 11)) & 0xffu);
}

static unsigned long check(const unsigned char *p, size_t len, int from, unsigned long round)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        if (p[i] != pat(i, from, round)) {
            fprintf(stderr, "round %lu: byte %zu of %zu from rank %d: 0x%02x, want 0x%02x\n",
                    round, i, len, from, p[i], pat(i, from, round));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size, opt, rma = 0, go = 1;
    double secs = 60, t0;
    size_t max = 1 << 20;
    long growth_mib = 64, rss0 = -1, rss_max = 0, rss1;
    unsigned long round = 0, errors = 0, bytes = 0, res[2];
    uint64_t seed = 12345;
    unsigned char *keep_s, *keep_r, *win_mem = NULL;
    MPI_Win win = MPI_WIN_NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "d:S:rg:")) != -1) {
        switch (opt) {
        case 'd': secs = atof(optarg); break;
        case 'S': max = strtoul(optarg, NULL, 0); break;
        case 'r': rma = 1; break;
        case 'g': growth_mib = atol(optarg); break;
        default:
            if (rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((size != 2) || (max < 8) || !(secs > 0)) {
        if (rank == 0) fprintf(stderr, "needs 2 ranks, -S >= 8, -d > 0\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    keep_s = malloc(max);
    keep_r = malloc(max);
    if ((keep_s == NULL) || (keep_r == NULL)) MPI_Abort(MPI_COMM_WORLD, 2);
    if (rma) {
        MPI_Win_allocate((MPI_Aint)max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win_mem, &win);
    }
    t0 = MPI_Wtime();
    while (go) {
        const int peer = 1 - rank;
        /* sizes: log-uniform from 1 B to max, the same on both ranks */
        uint64_t r    = next(&seed);
        size_t   len  = (size_t)1 << (r % 21);
        int      fresh = (int)((r >> 8) & 1);
        unsigned char *s, *d;
        MPI_Request req[2];
        size_t i;
        len = (len > max) ? max : len;
        len = (len > 1) ? len - ((r >> 16) % (len / 2)) : 1;
        s = fresh ? malloc(len) : keep_s;
        d = fresh ? malloc(len) : keep_r;
        if ((s == NULL) || (d == NULL)) MPI_Abort(MPI_COMM_WORLD, 2);
        for (i = 0; i < len; ++i) s[i] = pat(i, rank, round);
        MPI_Irecv(d, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(s, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        errors += check(d, len, peer, round);
        bytes += len;
        if (fresh) {
            free(s);
            free(d);
        }
        if (round % 8 == 0) {
            long v[64], sum[64];
            int k;
            for (k = 0; k < 64; ++k) v[k] = (long)(round + (unsigned long)k * 3u + (unsigned long)rank * 1000u);
            MPI_Allreduce(v, sum, 64, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
            for (k = 0; k < 64; ++k) {
                if (sum[k] != (long)(2 * (round + (unsigned long)k * 3u) + 1000u)) {
                    fprintf(stderr, "round %lu: allreduce element %d wrong\n", round, k);
                    ++errors;
                    break;
                }
            }
        }
        if (rma && (round % 16 == 0)) {
            /* put my pattern into the peer's window, then read it back */
            size_t n = (len < 64) ? 64 : len;
            unsigned char *buf = malloc(n), *back = malloc(n);
            if ((buf == NULL) || (back == NULL)) MPI_Abort(MPI_COMM_WORLD, 2);
            for (i = 0; i < n; ++i) buf[i] = pat(i, rank, round);
            MPI_Barrier(MPI_COMM_WORLD); /* the peer is done reading its window */
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win);
            MPI_Put(buf, (int)n, MPI_BYTE, peer, 0, (int)n, MPI_BYTE, win);
            MPI_Win_unlock(peer, win);
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            MPI_Get(back, (int)n, MPI_BYTE, peer, 0, (int)n, MPI_BYTE, win);
            MPI_Win_unlock(peer, win);
            errors += check(back, n, rank, round);
            MPI_Barrier(MPI_COMM_WORLD); /* both puts landed */
            MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
            errors += check(win_mem, n, peer, round);
            MPI_Win_unlock(rank, win);
            free(buf);
            free(back);
        }
        ++round;
        rss1 = rss_kib();
        if (rss1 > rss_max) rss_max = rss1;
        if ((rss0 < 0) && (MPI_Wtime() - t0 >= secs / 10)) rss0 = rss1;
        /* rank 0's clock decides, so both stop after the same round */
        if (round % 4 == 0) {
            go = (MPI_Wtime() - t0 < secs);
            MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
    }
    rss1 = rss_kib();
    if (rss0 < 0) rss0 = rss1;
    {
        int grew = (rss1 - rss0) > growth_mib * 1024;
        if (grew) {
            fprintf(stderr, "rank %d: resident memory grew from %ld to %ld KiB (limit %ld MiB)\n",
                    rank, rss0, rss1, growth_mib);
        }
        res[0] = errors;
        res[1] = (unsigned long)grew;
    }
    MPI_Allreduce(MPI_IN_PLACE, res, 2, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("soak: %.0f s, %lu rounds, %lu bytes, %lu errors, rss KiB start %ld end %ld max %ld%s\n",
               MPI_Wtime() - t0, round, bytes, res[0], rss0, rss1, rss_max,
               res[1] ? ", grew beyond the limit" : "");
    }
    if (rma) MPI_Win_free(&win);
    free(keep_s);
    free(keep_r);
    MPI_Finalize();
    return ((res[0] == 0) && (res[1] == 0)) ? 0 : 1;
}
