/* SPDX-License-Identifier: BSD-3-Clause */
/* OSU-style point-to-point benchmark with data validated on every receive.
 *
 * usage: zv_osu [-t TEST[=SIZES]]... [-s MIN] [-S MAX] [-i ITERS] [-b BYTES]
 *               [-w WINDOW] [-F] [-q]
 *   -t  test: lat (ping-pong latency), bw (bandwidth, a window of sends),
 *       bibw (bi-directional bandwidth), or one of them with "-fresh"
 *       (lat-fresh, bw-fresh, bibw-fresh: as -F for that test alone);
 *       bw and bibw also run with 2N ranks as N pairs (rank r with rank
 *       r+N) at once: multi-pair, aggregate MB/s. "=SIZES" gives the sizes,
 *       comma-separated bytes in any order (e.g. bw=8,4096,1048576);
 *       without, the powers of 2 from MIN to MAX. Repeat -t for several
 *       tests in one job, run in the order given.
 *   -s/-S  smallest and largest message size (bytes, powers of 2 between)
 *   -i  iterations at sizes up to 8 KiB
 *   -b  above 8 KiB, as many iterations as move BYTES (at least 5; default
 *       ITERS x 8 KiB)
 *   -w  messages in flight per window (bw, bibw)
 *   -F  send from a freshly allocated buffer every iteration (malloc/free
 *       between sends, to exercise the registration cache)
 * Two ranks (lat), an even number (bw, bibw). Prints "size  value  errors"
 * lines, "TEST size value errors" when -t is given more than once; exits 1
 * on any data error.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    size_t i;
    for (i = 0; i < len; ++i) {
        p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xffu);
    }
}

static unsigned long check(const unsigned char *p, size_t len, unsigned seed)
{
    unsigned long bad = 0;
    size_t i;
    for (i = 0; i < len; ++i) {
        bad += p[i] != (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xffu);
    }
    return bad ? 1 : 0;
}

static unsigned char *get_buf(size_t len, int fresh, unsigned char *fixed)
{
    unsigned char *b;
    if (!fresh) {
        return fixed;
    }
    b = malloc(len ? len : 1);
    if (b == NULL) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return b;
}

static void put_buf(unsigned char *b, int fresh)
{
    if (fresh) {
        free(b);
    }
}

/* One size of one test: the figure (usec or MB/s) in *value; returns the
 * data errors seen (bw, bibw: summed on rank 0). */
static unsigned long measure(const char *test, size_t size, int fresh, int iters, size_t bytes,
                             int window, int rank, int nranks, int peer, int sender,
                             unsigned char *sbuf, unsigned char *rbuf, unsigned *seed,
                             double *value)
{
    int n = iters, warm, i, w;
    double t0 = 0, t1;
    unsigned long errors = 0;
    if (size > 8192) {
        n = (int)(bytes / size);
    }
    if (n < 5) n = 5;
    warm = n / 10 + 1;
    MPI_Barrier(MPI_COMM_WORLD);

    if (!strcmp(test, "lat")) {
        for (i = 0; i < n + warm; ++i) {
            unsigned char *s = get_buf(size, fresh, sbuf);
            if (i == warm) t0 = MPI_Wtime();
            ++*seed;
            if (rank == 0) {
                fill(s, size, *seed);
                MPI_Send(s, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                errors += check(rbuf, size, *seed + 1000);
            } else {
                MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                errors += check(rbuf, size, *seed);
                fill(s, size, *seed + 1000);
                MPI_Send(s, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
            put_buf(s, fresh);
        }
        t1 = MPI_Wtime();
        *value = (t1 - t0) * 1e6 / (2.0 * n);
    } else {
        int win = window;
        int bidir = !strcmp(test, "bibw");
        MPI_Request reqs[2 * 256];
        if ((size_t)win * size > (64u << 20)) {
            win = (int)((64u << 20) / size);
            if (win < 1) win = 1;
        }
        if (win > 256) win = 256;
        n = n / win + 2;
        warm = 1;
        for (i = 0; i < n + warm; ++i) {
            int nreq = 0;
            unsigned char *s = get_buf(size * (size_t)win, fresh, sbuf);
            char ack = 0;
            if (i == warm) t0 = MPI_Wtime();
            ++*seed;
            if (sender || bidir) {
                for (w = 0; w < win; ++w) {
                    fill(s + (size_t)w * size, size, *seed * 31u + (unsigned)w + (unsigned)rank);
                    MPI_Isend(s + (size_t)w * size, (int)size, MPI_BYTE, peer, 2,
                              MPI_COMM_WORLD, &reqs[nreq++]);
                }
            }
            if (!sender || bidir) {
                for (w = 0; w < win; ++w) {
                    MPI_Irecv(rbuf + (size_t)w * size, (int)size, MPI_BYTE, peer, 2,
                              MPI_COMM_WORLD, &reqs[nreq++]);
                }
            }
            MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
            if (!sender || bidir) {
                for (w = 0; w < win; ++w) {
                    errors += check(rbuf + (size_t)w * size, size,
                                    *seed * 31u + (unsigned)w + (unsigned)peer);
                }
            }
            if (!sender) {
                MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            put_buf(s, fresh);
        }
        t1 = MPI_Wtime();
        {
            unsigned long e_all = 0;
            double dt = t1 - t0, dt_max = 0;
            MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            *value = (double)size * win * n * (bidir ? 2 : 1) * (nranks / 2) / dt_max / 1e6;
            MPI_Reduce(&errors, &e_all, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
            errors = e_all;
        }
    }
    return errors;
}

enum { max_jobs = 8, max_sizes = 64 };

/* One test of the job: its name as given, and its sizes. */
struct job {
    const char *name;
    char        test[8]; /* lat, bw, bibw */
    int         fresh;
    size_t      sizes[max_sizes];
    int         nsizes;
};

static int parse_job(struct job *j, char *arg, size_t min, size_t max, int fresh)
{
    char *eq = strchr(arg, '='), *dash;
    size_t len;
    j->name = arg;
    j->fresh = fresh;
    j->nsizes = 0;
    if (eq != NULL) {
        *eq = '\0';
    }
    dash = strstr(arg, "-fresh");
    if (dash != NULL) {
        if (dash[6] != '\0') {
            return -1;
        }
        j->fresh = 1;
    }
    len = (dash != NULL) ? (size_t)(dash - arg) : strlen(arg);
    if (len >= sizeof(j->test)) {
        return -1;
    }
    memcpy(j->test, arg, len);
    j->test[len] = '\0';
    if (strcmp(j->test, "lat") && strcmp(j->test, "bw") && strcmp(j->test, "bibw")) {
        return -1;
    }
    if (eq != NULL) {
        char *tok, *save = NULL, *end;
        for (tok = strtok_r(eq + 1, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
            unsigned long v = strtoul(tok, &end, 0);
            if ((*end != '\0') || (v == 0) || (v > (1ul << 30)) || (j->nsizes == max_sizes)) {
                return -1;
            }
            j->sizes[j->nsizes++] = v;
        }
        return j->nsizes > 0 ? 0 : -1;
    }
    if ((min == 0) || (max < min)) {
        return -1;
    }
    for (size_t size = min; (size <= max) && (j->nsizes < max_sizes); size *= 2) {
        j->sizes[j->nsizes++] = size;
        if (size > max / 2) break; /* avoid overflow at the top */
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *tests[max_jobs];
    struct job jobs[max_jobs];
    int ntests = 0, njobs, jn, k;
    size_t min = 1, max = 4u << 20, size, bufsize = 0, bytes = 0;
    int iters = 1000, window = 16, fresh = 0, quiet = 0, opt, bad = 0;
    int rank, nranks, peer, sender;
    unsigned long errors = 0, total_errors = 0;
    unsigned char *sbuf, *rbuf;
    unsigned seed = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "t:s:S:i:b:w:Fq")) != -1) {
        switch (opt) {
        case 't':
            if (ntests == max_jobs) bad = 1;
            else tests[ntests++] = optarg;
            break;
        case 's': min = strtoul(optarg, NULL, 0); break;
        case 'S': max = strtoul(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'b': bytes = strtoul(optarg, NULL, 0); bad |= bytes == 0; break;
        case 'w': window = atoi(optarg); break;
        case 'F': fresh = 1; break;
        case 'q': quiet = 1; break;
        default:
            if (rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((bytes == 0) && (iters > 0)) {
        bytes = (size_t)iters * 8192;
    }
    if (ntests == 0) {
        tests[ntests++] = "lat";
    }
    njobs = ntests;
    for (jn = 0; jn < njobs; ++jn) {
        bad |= parse_job(&jobs[jn], tests[jn], min, max, fresh) != 0;
        bad |= !strcmp(jobs[jn].test, "lat") && (nranks != 2);
        for (k = 0; !bad && (k < jobs[jn].nsizes); ++k) {
            if (jobs[jn].sizes[k] > bufsize) bufsize = jobs[jn].sizes[k];
        }
    }
    if (bad || (nranks < 2) || (nranks % 2) || (iters < 1) || (window < 1)) {
        if (rank == 0) fprintf(stderr, "usage: 2 ranks (lat) or 2N (bw, bibw); -t lat|bw|bibw[-fresh][=SIZE,...] (at most %d), 0 < -s <= -S\n", max_jobs);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = (rank + nranks / 2) % nranks;   /* 2 ranks: the other one */
    sender = rank < nranks / 2;
    sbuf = malloc(bufsize * (size_t)window);
    rbuf = malloc(bufsize * (size_t)window);
    if ((sbuf == NULL) || (rbuf == NULL)) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (jn = 0; jn < njobs; ++jn) {
        if ((rank == 0) && !quiet) {
            printf("# zv_osu %s%s, %d pair(s): %ssize  %s  errors\n", jobs[jn].test,
                   jobs[jn].fresh ? " (fresh buffers)" : "", nranks / 2, (njobs > 1) ? "test  " : "",
                   strcmp(jobs[jn].test, "lat") ? "MB/s" : "usec");
        }
        for (k = 0; k < jobs[jn].nsizes; ++k) {
            unsigned long e_all = 0;
            double value;
            size = jobs[jn].sizes[k];
            errors = measure(jobs[jn].test, size, jobs[jn].fresh, iters, bytes, window, rank,
                             nranks, peer, sender, sbuf, rbuf, &seed, &value);
            if (rank == 0) {
                if (njobs > 1) {
                    printf("%s ", jobs[jn].name);
                }
                printf("%zu %.2f %lu\n", size, value, errors);
            }
            MPI_Allreduce(&errors, &e_all, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
            total_errors += e_all;
            fflush(stdout);
        }
    }
    if (rank == 0 && total_errors) {
        fprintf(stderr, "zv_osu: %lu message(s) arrived corrupted\n", total_errors);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
