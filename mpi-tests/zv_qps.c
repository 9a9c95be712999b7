/* SPDX-License-Identifier: BSD-3-Clause */
/* Queue pairs held by a job whose ranks all talked to each other both ways.
 *
 * Every pair of ranks exchanges an eager message (64 B) and a rendezvous
 * one (-S bytes, default 1 MiB) in both directions, data validated. Then,
 * with every connection made and the job still alive, each rank lists its
 * own connected queue pairs in the kernel's resource tracking (`rdma
 * resource show qp`, iproute2) and rank 0 matches their peer QP numbers
 * (one device: numbers are unique) and prints, per type:
 *
 *   qps RC: 6 in all, per pair of ranks 2..2, to itself 2, to no rank 0 (ranks 2, round 1)
 *
 * "per pair of ranks": both ends of every connection between two ranks,
 * the fewest and the most over all pairs; "to itself": a rank's loopback
 * connections (UCP's endpoint to its own worker).
 *
 * Exit 0 when the data was intact and the counts could be read, 1 on a
 * data error, 2 when `rdma` cannot be run. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_QPS 1024

/* One connected QP of this process: its number, its peer's, 0 RC / 1 UC. */
struct qp_rec {
    int lqpn, rqpn, type;
};

static int field(const char *line, const char *name)
{
    const char *p = strstr(line, name);
    return (p != NULL) ? atoi(p + strlen(name)) : -1;
}

/* Whether a line of `rdma resource show` names a thread of this process:
 * the kernel records the thread that created the object (zverbs creates a
 * passive QP in UCX's async thread when it answers for a rank that is away). */
static int ours(const char *line)
{
    char task[64];
    snprintf(task, sizeof(task), "/proc/self/task/%d", field(line, " pid "));
    return access(task, F_OK) == 0;
}

/* This process's RC and UC QPs; -1 when `rdma` cannot be run. */
static int list_qps(struct qp_rec *out, int max)
{
    char line[512];
    int n = 0, lines = 0;
    FILE *f = popen("rdma resource show qp 2>/dev/null", "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);
        if ((len > 0) && (line[len - 1] == '\n')) {
            line[len - 1] = ' ';
        }
        ++lines;
        int type = strstr(line, " type RC ") ? 0 : (strstr(line, " type UC ") ? 1 : -1);
        if ((type < 0) || !ours(line) || (n == max)) {
            continue;
        }
        out[n].lqpn = field(line, " lqpn ");
        out[n].rqpn = field(line, " rqpn ");
        out[n].type = type;
        ++n;
    }
    return ((pclose(f) == 0) && (lines > 0)) ? n : -1;
}

/* The rank holding QP number qpn (one device: numbers are unique), or -1. */
static int owner(const struct qp_rec *all, const int *counts, int size, int qpn)
{
    for (int r = 0; r < size; ++r) {
        for (int i = 0; i < counts[r]; ++i) {
            if (all[r * MAX_QPS + i].lqpn == qpn) {
                return r;
            }
        }
    }
    return -1;
}

static void fill(unsigned char *p, size_t len, int from, int to)
{
    for (size_t i = 0; i < len; ++i) {
        p[i] = (unsigned char)(i * 7 + from * 31 + to * 17);
    }
}

static int check(const unsigned char *p, size_t len, int from, int to)
{
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != (unsigned char)(i * 7 + from * 31 + to * 17)) {
            return 1;
        }
    }
    return 0;
}

/* Every pair of ranks, both ways, an eager and a rendezvous message. Every
 * peer in rank order: pair (a, b) meets once each has done its peers below
 * the other, so the order cannot deadlock. */
static void exchange(unsigned char *out, unsigned char *in, size_t big, int rank, int size,
                     int *errors)
{
    for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) {
            continue;
        }
        size_t lens[2] = {64, big};
        for (int k = 0; k < 2; ++k) {
            fill(out, lens[k], rank, peer);
            memset(in, 0, lens[k]);
            MPI_Sendrecv(out, (int)lens[k], MPI_BYTE, peer, k, in, (int)lens[k], MPI_BYTE,
                         peer, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            *errors += check(in, lens[k], peer, rank);
        }
    }
}

/* Rank 0: per type, QPs in all, connected to the same rank, to no rank of
 * the job, and per pair of ranks (both ends) the fewest and the most.
 * Prints when 'print'; returns the QPs whose peer QP is in no rank. */
static int report(const struct qp_rec *all, const int *counts, const int *errs, int size,
                  int print, int round, int *rc)
{
    int total[2] = {0, 0}, self[2] = {0, 0}, other[2] = {0, 0};
    int pmax[2] = {0, 0}, pmin[2] = {1 << 30, 1 << 30}, unknown = 0, bad = 0;
    int *pair = calloc((size_t)size * (size_t)size * 2, sizeof(int));
    for (int r = 0; r < size; ++r) {
        unknown |= counts[r] < 0;
        bad += errs[r];
        for (int i = 0; i < counts[r]; ++i) {
            const struct qp_rec *q = &all[r * MAX_QPS + i];
            int peer = owner(all, counts, size, q->rqpn);
            ++total[q->type];
            if (peer == r) {
                ++self[q->type];
            } else if (peer < 0) {
                ++other[q->type];
            } else {
                int a = (r < peer) ? r : peer, b = (r < peer) ? peer : r;
                ++pair[(a * size + b) * 2 + q->type];
            }
        }
    }
    for (int a = 0; a < size; ++a) {
        for (int b = a + 1; b < size; ++b) {
            for (int t = 0; t < 2; ++t) {
                int v   = pair[(a * size + b) * 2 + t];
                pmax[t] = (v > pmax[t]) ? v : pmax[t];
                pmin[t] = (v < pmin[t]) ? v : pmin[t];
            }
        }
    }
    free(pair);
    if (print) {
        static const char *names[2] = {"RC", "UC"};
        for (int t = 0; t < 2; ++t) {
            printf("qps %s: %d in all, per pair of ranks %d..%d, to itself %d, "
                   "to no rank %d (ranks %d, round %d)\n", names[t], total[t],
                   (size > 1) ? pmin[t] : 0, pmax[t], self[t], other[t], size, round);
        }
        printf("data errors %d\n", bad);
    }
    *rc = bad ? 1 : (unknown ? 2 : 0);
    return other[0] + other[1];
}

int main(int argc, char **argv)
{
    size_t big = 1 << 20;
    int rank, size, opt, errors = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "S:")) != -1) {
        if (opt == 'S') {
            big = strtoul(optarg, NULL, 0);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: zv_qps [-S rendezvous-bytes]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    unsigned char *out = malloc(big), *in = malloc(big);
    if ((out == NULL) || (in == NULL)) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct qp_rec *mine = calloc(MAX_QPS, sizeof(*mine));
    struct qp_rec *all  = calloc((size_t)MAX_QPS * (size_t)size, sizeof(*all));
    int *counts = calloc((size_t)size, sizeof(int)), *errs = calloc((size_t)size, sizeof(int));
    int rc = 0, again = 1, pass;
    /* A transport may finish connecting after the first messages (UCX's
     * rc_verbs sends through its auxiliary transport meanwhile, and under
     * load takes seconds): count once no QP waits for its peer QP, trying
     * again every 100 ms for up to 60 s. */
    double until = MPI_Wtime() + 60;
    for (pass = 1; again; ++pass) {
        if (pass > 1) {
            usleep(100000);
        }
        exchange(out, in, big, rank, size, &errors);
        MPI_Barrier(MPI_COMM_WORLD);
        int n = list_qps(mine, MAX_QPS);
        MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Gather(&errors, 1, MPI_INT, errs, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Gather(mine, MAX_QPS * 3, MPI_INT, all, MAX_QPS * 3, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            int waiting = report(all, counts, errs, size, 0, pass, &rc);
            again       = (waiting > 0) && (MPI_Wtime() < until);
            if (!again) {
                (void)report(all, counts, errs, size, 1, pass, &rc);
            }
        }
        MPI_Bcast(&again, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    free(errs);
    free(counts);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    free(mine);
    free(in);
    free(out);
    MPI_Finalize();
    return rc;
}
