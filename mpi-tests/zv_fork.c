/* SPDX-License-Identifier: BSD-3-Clause */
/* Fork after registration: an MPI code that calls system() or fork() while
 * its buffers are registered (and cached) keeps working, and the child
 * neither corrupts nor sees the parent's registered memory.
 *
 * usage: zv_fork [-S SIZE] [-i ROUNDS] [-M]
 *   -S  message size in bytes (default 4 MiB: rendezvous, zero-copy)
 *   -i  rounds (default 3)
 *   -M  the test's own check: the buffers are MAP_SHARED, so the child
 *       really shares the parent's pages and the run must report errors
 * Two ranks. Each round, with the same two buffers every time (so their
 * registrations stay in the cache across the fork):
 *   1. exchange a fresh pattern both ways, every byte checked;
 *   2. system("true") (glibc may spawn it without copying the address
 *      space), then fork(). The child touches every page of both buffers
 *      and writes 0x5a into each page it can reach. A page may be absent in
 *      the child: libibverbs marks registered memory MADV_DONTFORK once
 *      ibv_fork_init() ran, which UCX's ib md does by default
 *      (UCX_IB_FORK_INIT=try), even on kernels that copy pinned pages at
 *      fork. Otherwise the page is the child's own copy.
 *   3. exchange a new pattern through the same buffers: the peer's RDMA must
 *      land in the parent, and what the parent sends must be its own data,
 *      not the child's 0x5a;
 *   4. the child, released, checks the pages of its receive buffer it could
 *      reach still hold its 0x5a (nothing of step 3 reached it), prints how
 *      many pages were absent and how many were copies, and exits 0, or 3
 *      if it saw the parent's data. The parent reaps it and counts that.
 * Prints "fork rounds R messages M errors E child-errors C"; exits 1 on any
 * error.
 */
#include <mpi.h>

#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned char pattern(size_t i, int from, unsigned round)
{
    return (unsigned char)((i * 29u + (unsigned)from * 101u + round * 13u + (i >> 12)) & 0xffu);
}

/* Exchange: send s to the peer, receive r from it; count the bytes of r
 * that are not the peer's pattern for this round. */
static unsigned long exchange(unsigned char *s, unsigned char *r, size_t len, int rank,
                              unsigned round)
{
    const int peer = 1 - rank;
    MPI_Request req[2];
    unsigned long bad = 0;
    size_t i;
    for (i = 0; i < len; ++i) s[i] = pattern(i, rank, round);
    memset(r, 0xee, len);
    MPI_Irecv(r, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(s, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    for (i = 0; i < len; ++i) bad += (r[i] != pattern(i, peer, round));
    if (bad != 0) {
        fprintf(stderr, "rank %d round %u: %lu bytes of %zu wrong\n", rank, round, bad, len);
    }
    return bad;
}

static sigjmp_buf g_probe;

static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(g_probe, 1);
}

/* Touch one byte: 1 if the page is there, 0 if it faulted. */
static int probe(volatile unsigned char *p, int write, unsigned char *val)
{
    if (sigsetjmp(g_probe, 1) != 0) return 0;
    if (write) *p = 0x5a;
    *val = *p;
    return 1;
}

/* The child (no MPI). 'ready' tells the parent its writes are done; 'go'
 * says the parent's exchange after the fork has completed. Returns the
 * exit status: 0, or 3 when it saw the parent's data. */
static int child_main(unsigned char *s, unsigned char *r, size_t len, int ready, int go)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned long absent = 0, copied = 0, seen = 0;
    unsigned char v;
    struct sigaction sa;
    char c = 'r';
    size_t off;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    for (off = 0; off < len; off += page) {
        if (probe(s + off, 1, &v)) ++copied; else ++absent;
        if (probe(r + off, 1, &v)) ++copied; else ++absent;
    }
    if (write(ready, &c, 1) != 1) return 4;
    if (read(go, &c, 1) != 1) return 4;
    for (off = 0; off < len; off += page) {
        seen += probe(r + off, 0, &v) && (v != 0x5a);
    }
    fprintf(stderr, "child %d: %lu pages absent, %lu private copies, %lu pages showed data "
            "received after the fork\n", (int)getpid(), absent, copied, seen);
    return (seen == 0) ? 0 : 3;
}

int main(int argc, char **argv)
{
    size_t len = (size_t)4 << 20;
    int rounds = 3, rank, size, opt, shared = 0;
    unsigned long errors = 0, child_errors = 0, msgs = 0, all[2], sum[2];
    unsigned char *s, *r;
    unsigned round;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "S:i:M")) != -1) {
        switch (opt) {
        case 'S': len = strtoul(optarg, NULL, 0); break;
        case 'i': rounds = atoi(optarg); break;
        case 'M': shared = 1; break;
        default:
            if (rank == 0) fprintf(stderr, "usage: zv_fork [-S SIZE] [-i ROUNDS] [-M]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((size != 2) || (len == 0) || (len > (1u << 30)) || (rounds < 1)) {
        if (rank == 0) fprintf(stderr, "zv_fork: needs 2 ranks, 0 < SIZE <= 1 GiB, ROUNDS >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* A child that dies early must show up in waitpid, not as SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (shared) {
        s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        r = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        s = (s == MAP_FAILED) ? NULL : s;
        r = (r == MAP_FAILED) ? NULL : r;
    } else {
        s = malloc(len);
        r = malloc(len);
    }
    if ((s == NULL) || (r == NULL)) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (round = 0; round < (unsigned)rounds; ++round) {
        int go[2], ready[2];
        char c;
        pid_t child;
        int status;

        errors += exchange(s, r, len, rank, 2 * round);
        ++msgs;

        if (system("true") != 0) {
            fprintf(stderr, "rank %d: system(\"true\") failed\n", rank);
            ++errors;
        }
        if ((pipe(go) != 0) || (pipe(ready) != 0)) {
            perror("pipe");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        child = fork();
        if (child < 0) {
            perror("fork");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (child == 0) {
            close(go[1]);
            close(ready[0]);
            _exit(child_main(s, r, len, ready[1], go[0]));
        }
        close(go[0]);
        close(ready[1]);
        /* The child writes first, so a shared page would carry its 0x5a
         * into what the parent sends or receives. */
        if (read(ready[0], &c, 1) != 1) {
            fprintf(stderr, "rank %d round %u: the child died before writing\n", rank, round);
        }
        close(ready[0]);
        MPI_Barrier(MPI_COMM_WORLD);

        errors += exchange(s, r, len, rank, 2 * round + 1);
        ++msgs;

        if (write(go[1], "g", 1) != 1) perror("write");
        close(go[1]);
        if (waitpid(child, &status, 0) != child) {
            perror("waitpid");
            ++child_errors;
        } else if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
            fprintf(stderr, "rank %d round %u: child %s %d (3: it saw the parent's data)\n", rank,
                    round, WIFEXITED(status) ? "exited" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            ++child_errors;
        }
    }

    all[0] = errors;
    all[1] = child_errors;
    MPI_Reduce(all, sum, 2, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("fork rounds %d messages %lu errors %lu child-errors %lu\n", rounds, 2 * msgs,
               sum[0], sum[1]);
    }
    if (shared) {
        munmap(s, len);
        munmap(r, len);
    } else {
        free(s);
        free(r);
    }
    MPI_Finalize();
    return (rank == 0) && (sum[0] + sum[1] != 0) ? 1 : 0;
}
