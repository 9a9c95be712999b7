/* SPDX-License-Identifier: BSD-3-Clause */
/* Registration-cache stress under MPI: between large (rendezvous, zero-copy)
 * sends, rank 0 changes the pages behind its send buffer in the ways real
 * programs do - some through libc, some with direct system calls that no
 * interception hook sees - and refills it. Rank 1 checks every byte: a
 * registration cache that missed a change sends the old pages' contents.
 *
 * usage: zv_cache_stress [-s SIZE] [-n ROUNDS]   (2 ranks)
 * Prints one line per mode: "mode  messages  corrupted"; exits 1 if any
 * message arrived corrupted.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        p[i] = (unsigned char)((i * 167u + seed * 13u + (i >> 12)) & 0xffu);
    }
}

static int corrupted(const unsigned char *p, size_t len, unsigned seed)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        if (p[i] != (unsigned char)((i * 167u + seed * 13u + (i >> 12)) & 0xffu)) {
            return 1;
        }
    }
    return 0;
}

static void *raw_mmap(void *addr, size_t len, int flags)
{
    return (void *)syscall(SYS_mmap, addr, len, PROT_READ | PROT_WRITE, flags, -1, 0);
}

enum { M_REUSE, M_FREE_MALLOC, M_MUNMAP_MMAP_FIXED, M_SYSCALL_REMAP, M_SYSCALL_DONTNEED,
       M_REALLOC, M_LAST };
static const char *names[] = {"reuse", "free+malloc", "munmap+mmap(FIXED)",
                              "syscall munmap+mmap(FIXED)", "syscall madvise(DONTNEED)",
                              "realloc"};

/* Replace the memory behind *buf (size len) according to mode; returns the
 * (possibly moved) buffer. */
static unsigned char *change(int mode, unsigned char *buf, size_t len)
{
    void *p;
    switch (mode) {
    case M_FREE_MALLOC:
        free(buf);               /* large: glibc returns it with munmap */
        return malloc(len);      /* and usually hands back the same address */
    case M_MUNMAP_MMAP_FIXED:
        munmap(buf, len);
        p = mmap(buf, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        return (p == MAP_FAILED) ? NULL : p;
    case M_SYSCALL_REMAP:
        /* new pages at the same address, behind every hook's back */
        p = raw_mmap(buf, len, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
        return (p == MAP_FAILED) ? NULL : p;
    case M_SYSCALL_DONTNEED:
        syscall(SYS_madvise, buf, len, MADV_DONTNEED);
        return buf;
    case M_REALLOC:
        return realloc(buf, len + 4096 * (1 + (rand() % 4)));
    default:
        return buf;
    }
}

int main(int argc, char **argv)
{
    size_t size = 1u << 20;
    int rounds = 12, opt, rank, nranks, mode, i;
    unsigned seed = 1;
    unsigned long total_bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "s:n:")) != -1) {
        if (opt == 's') size = strtoul(optarg, NULL, 0);
        else if (opt == 'n') rounds = atoi(optarg);
    }
    if ((nranks != 2) || (size < 4096) || (rounds < 1)) {
        if (rank == 0) fprintf(stderr, "usage: 2 ranks, -s >= 4096, -n >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        printf("# zv_cache_stress: %zu-byte messages, %d per mode\n", size, rounds);
    }

    for (mode = 0; mode < M_LAST; ++mode) {
        unsigned long bad = 0, all_bad = 0;
        unsigned char *buf;
        if (mode == M_MUNMAP_MMAP_FIXED || mode == M_SYSCALL_REMAP ||
            mode == M_SYSCALL_DONTNEED) {
            buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (buf == MAP_FAILED) buf = NULL;
        } else {
            buf = malloc(size);
        }
        if (buf == NULL) {
            fprintf(stderr, "rank %d: out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (i = 0; i < rounds; ++i) {
            ++seed;
            if (rank == 0) {
                if (i > 0) {
                    buf = change(mode, buf, size);
                    if (buf == NULL) {
                        fprintf(stderr, "%s: could not re-create the buffer\n", names[mode]);
                        MPI_Abort(MPI_COMM_WORLD, 2);
                    }
                }
                fill(buf, size, seed);
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
            } else {
                memset(buf, 0, size);
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += (unsigned long)corrupted(buf, size, seed);
            }
        }
        if (mode == M_MUNMAP_MMAP_FIXED || mode == M_SYSCALL_REMAP ||
            mode == M_SYSCALL_DONTNEED) {
            munmap(buf, size);
        } else {
            free(buf);
        }
        MPI_Allreduce(&bad, &all_bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%-28s %4d %4lu\n", names[mode], rounds, all_bad);
            fflush(stdout);
        }
        total_bad += all_bad;
    }
    if (rank == 0 && total_bad) {
        fprintf(stderr, "zv_cache_stress: %lu message(s) arrived corrupted\n", total_bad);
    }
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
