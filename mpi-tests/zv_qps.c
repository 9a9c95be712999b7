/* SPDX-License-Identifier: BSD-3-Clause */
/* Queue pairs held by a job whose ranks all talked to each other both ways.
 *
 * Every pair of ranks exchanges an eager message (64 B) and a rendezvous
 * one (-S bytes, default 1 MiB) in both directions, data validated. Then,
 * with every connection made and the job still alive, each rank counts its
 * own connected queue pairs in the kernel's resource tracking (`rdma
 * resource show qp`, iproute2) and rank 0 prints, per type:
 *
 *   qps: RC 4 UC 0 ranks 2 (rank 0: RC 2 UC 0, ...)
 *
 * Exit 0 when the data was intact and the counts could be read, 1 on a
 * data error, 2 when `rdma` cannot be run. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int count_qps(const char *type)
{
    char line[512], pid[32], kind[16];
    int n = 0, lines = 0;
    FILE *f = popen("rdma resource show qp 2>/dev/null", "r");
    if (f == NULL) {
        return -1;
    }
    snprintf(pid, sizeof(pid), "pid %d ", (int)getpid());
    snprintf(kind, sizeof(kind), "type %s ", type);
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);
        if ((len > 0) && (line[len - 1] == '\n')) {
            line[len - 1] = ' ';
        }
        ++lines;
        n += (strstr(line, pid) != NULL) && (strstr(line, kind) != NULL);
    }
    return ((pclose(f) == 0) && (lines > 0)) ? n : -1;
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
    /* Every peer in rank order: pair (a, b) meets once each has done its
     * peers below the other, so the order cannot deadlock. */
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
            errors += check(in, lens[k], peer, rank);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int mine[3] = {count_qps("RC"), count_qps("UC"), errors};
    int *all = malloc(sizeof(mine) * (size_t)size);
    MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (rank == 0) {
        int rcs = 0, ucs = 0, errs = 0, unknown = 0;
        for (int r = 0; r < size; ++r) {
            unknown |= (all[3 * r] < 0) || (all[3 * r + 1] < 0);
            rcs += all[3 * r];
            ucs += all[3 * r + 1];
            errs += all[3 * r + 2];
        }
        printf("qps: RC %d UC %d ranks %d (", rcs, ucs, size);
        for (int r = 0; r < size; ++r) {
            printf("%srank %d: RC %d UC %d", r ? ", " : "", r, all[3 * r], all[3 * r + 1]);
        }
        printf("); data errors %d\n", errs);
        rc = errs ? 1 : (unknown ? 2 : 0);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    free(in);
    free(out);
    MPI_Finalize();
    return rc;
}
