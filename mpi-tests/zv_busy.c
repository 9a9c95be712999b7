/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank that computes while its peers send to it: the last rank (B) makes
 * no MPI call for SECONDS, while every other rank sends it an eager (8 B)
 * and a rendezvous (1 MiB) message and enters an allreduce that B joins
 * only when it is back. A transport that answers its peers only from the
 * worker's progress ends the job (its peers time out); one that answers
 * from its async context finishes it with every byte in place.
 *
 * usage: zv_busy [-s SECONDS] [-w spin|read] [-m cold|warm|mixed]
 *   -s  how long B computes (default 45)
 *   -w  spin: a busy loop (default); read: blocked in read() on a pipe
 *       that a thread of B's writes to after SECONDS
 *   -m  cold: no rank talked to B before (the first message to B is sent
 *       while it computes: the connection is set up then); warm: every
 *       rank first exchanged both sizes with B both ways; mixed (default):
 *       rank 0 cold, the others warm (with 2 ranks: cold)
 * Any number of ranks, at least 2. Prints one line and exits 1 on any data
 * error; a transport that gives up on B ends the job itself.
 */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (1024 * 1024)
#define NRED 1024

static unsigned char pattern(size_t i, int from, int to, int size_class)
{
    return (unsigned char)((i * 131u + (unsigned)from * 17u + (unsigned)to * 5u +
                            (unsigned)size_class * 61u + (i >> 10)) & 0xffu);
}

static void fill(unsigned char *p, size_t len, int from, int to, int c)
{
    for (size_t i = 0; i < len; ++i) p[i] = pattern(i, from, to, c);
}

static unsigned long check(const unsigned char *p, size_t len, int from, int to, int c)
{
    unsigned long bad = 0;
    for (size_t i = 0; i < len; ++i) bad += (p[i] != pattern(i, from, to, c));
    return bad;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct waker {
    int    fd;
    double seconds;
};

static void *wake_later(void *arg)
{
    struct waker *w = arg;
    struct timespec ts = {(time_t)w->seconds,
                          (long)((w->seconds - (double)(time_t)w->seconds) * 1e9)};
    char c = 'x';
    while (nanosleep(&ts, &ts) != 0) {
    }
    if (write(w->fd, &c, 1) != 1) perror("zv_busy: write");
    return NULL;
}

/* B computes: no MPI call for 'seconds'. */
static void compute(double seconds, int blocked)
{
    if (!blocked) {
        volatile double x = 1.0;
        double end = now() + seconds;
        while (now() < end) {
            for (int i = 0; i < 100000; ++i) x = x * 1.0000001 + 1e-9;
        }
        return;
    }
    int fds[2];
    pthread_t t;
    if (pipe(fds) != 0) {
        perror("zv_busy: pipe");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct waker w = {fds[1], seconds};
    pthread_create(&t, NULL, wake_later, &w);
    char c;
    if (read(fds[0], &c, 1) != 1) perror("zv_busy: read");
    pthread_join(t, NULL);
    close(fds[0]);
    close(fds[1]);
}

/* An exchange of both sizes with 'peer', before B computes (warm ranks). */
static unsigned long warm_up(int me, int peer, int first, unsigned char *small,
                             unsigned char *big)
{
    unsigned long bad = 0;
    for (int turn = 0; turn < 2; ++turn) {
        if ((turn == 0) == first) {
            fill(small, 8, me, peer, 0);
            fill(big, BIG, me, peer, 1);
            MPI_Send(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Send(big, BIG, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        } else {
            MPI_Recv(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(big, BIG, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += check(small, 8, peer, me, 0) + check(big, BIG, peer, me, 1);
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    double seconds = 45;
    int blocked = 0, mode = 2; /* 0 cold, 1 warm, 2 mixed */
    int opt;
    while ((opt = getopt(argc, argv, "s:w:m:")) != -1) {
        if (opt == 's') {
            seconds = atof(optarg);
        } else if ((opt == 'w') && (!strcmp(optarg, "spin") || !strcmp(optarg, "read"))) {
            blocked = !strcmp(optarg, "read");
        } else if ((opt == 'm') && !strcmp(optarg, "cold")) {
            mode = 0;
        } else if ((opt == 'm') && !strcmp(optarg, "warm")) {
            mode = 1;
        } else if ((opt == 'm') && !strcmp(optarg, "mixed")) {
            mode = 2;
        } else {
            fprintf(stderr, "usage: zv_busy [-s SECONDS] [-w spin|read] [-m cold|warm|mixed]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "zv_busy: needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int b = size - 1;
    /* warm(r): rank r talked to B before B computes */
#define WARM(r) ((mode == 1) || ((mode == 2) && ((r) != 0)))
    unsigned char *small = malloc(8), *big = malloc(BIG);
    int *red = malloc(NRED * sizeof(int)), *sum = malloc(NRED * sizeof(int));
    if (!small || !big || !red || !sum) {
        fprintf(stderr, "zv_busy: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned long bad = 0;
    int warm = 0;
    MPI_Comm others;
    MPI_Comm_split(MPI_COMM_WORLD, me == b, me, &others);
    double t0 = now();
    if (me == b) {
        for (int r = 0; r < b; ++r) {
            if (WARM(r)) {
                bad += warm_up(me, r, 0, small, big);
            }
        }
        compute(seconds, blocked);
        for (int r = 0; r < b; ++r) { /* what the others sent meanwhile */
            MPI_Recv(small, 8, MPI_BYTE, r, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(big, BIG, MPI_BYTE, r, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += check(small, 8, r, me, 2) + check(big, BIG, r, me, 3);
            warm += WARM(r);
        }
    } else {
        if (WARM(me)) {
            bad += warm_up(me, b, 1, small, big);
        }
        /* B computes once every warm rank has had its answer; the cold
         * ones send a second later, so their first message meets it
         * computing. */
        MPI_Barrier(others);
        if (!WARM(me)) {
            sleep(1);
        }
        MPI_Request req[2];
        fill(small, 8, me, b, 2);
        fill(big, BIG, me, b, 3);
        MPI_Isend(small, 8, MPI_BYTE, b, 3, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(big, BIG, MPI_BYTE, b, 4, MPI_COMM_WORLD, &req[1]);
        /* the allreduce below waits for B: the others progress meanwhile */
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    for (int j = 0; j < NRED; ++j) red[j] = (me + 1) * (j + 1);
    MPI_Allreduce(red, sum, NRED, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const long ranks = (long)size * (size + 1) / 2;
    for (int j = 0; j < NRED; ++j) bad += (sum[j] != (int)(ranks * (j + 1)));
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned long total = 0;
    MPI_Reduce(&bad, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, b, MPI_COMM_WORLD);
    if (me == b) {
        printf("busy: %d ranks, rank %d computed %.0f s (%s) while %d cold and %d warm ranks "
               "sent 8 B and 1 MiB and entered an allreduce: %lu errors, %.1f s\n",
               size, b, seconds, blocked ? "blocked in read()" : "busy loop", b - warm, warm,
               total, now() - t0);
    }
    MPI_Comm_free(&others);
    free(small);
    free(big);
    free(red);
    free(sum);
    MPI_Finalize();
    return total ? 1 : 0;
}
