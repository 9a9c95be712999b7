/* SPDX-License-Identifier: BSD-3-Clause */
/* OSU-style point-to-point benchmark with data validated on every receive.
 *
 * usage: zv_osu [-t TEST[=SIZES]]... [-s MIN] [-S MAX] [-i ITERS] [-b BYTES]
 *               [-T SECONDS] [-w WINDOW] [-F] [-q]
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
 *   -T  at most about SECONDS per size: the warm-up (then at most 10 ping-
 *       pongs) times a step and the count is cut to what fits, never below
 *       5 ping-pongs or 1 window (default: no limit)
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

/* What every size of the job shares: the counts from the command line, the
 * ranks and the buffers. */
struct run {
    int            iters;   /* -i */
    size_t         bytes;   /* -b */
    int            window;  /* -w */
    double         budget;  /* -T, seconds; 0: none */
    int            rank, nranks, peer, sender;
    unsigned char *sbuf, *rbuf;
    unsigned       seed;
};

/* One ping-pong of SIZE bytes; returns the data errors seen here. */
static unsigned long lat_step(struct run *r, size_t size, int fresh)
{
    unsigned char *s = get_buf(size, fresh, r->sbuf);
    unsigned long errors;
    ++r->seed;
    if (r->rank == 0) {
        fill(s, size, r->seed);
        MPI_Send(s, (int)size, MPI_BYTE, r->peer, 1, MPI_COMM_WORLD);
        MPI_Recv(r->rbuf, (int)size, MPI_BYTE, r->peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errors = check(r->rbuf, size, r->seed + 1000);
    } else {
        MPI_Recv(r->rbuf, (int)size, MPI_BYTE, r->peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errors = check(r->rbuf, size, r->seed);
        fill(s, size, r->seed + 1000);
        MPI_Send(s, (int)size, MPI_BYTE, r->peer, 1, MPI_COMM_WORLD);
    }
    put_buf(s, fresh);
    return errors;
}

/* One window of WIN messages of SIZE bytes (both ways when BIDIR), then the
 * receiver's ack; returns the data errors seen here. */
static unsigned long win_step(struct run *r, size_t size, int fresh, int win, int bidir)
{
    MPI_Request reqs[2 * 256];
    unsigned char *s = get_buf(size * (size_t)win, fresh, r->sbuf);
    unsigned long errors = 0;
    int nreq = 0, w;
    char ack = 0;
    ++r->seed;
    if (r->sender || bidir) {
        for (w = 0; w < win; ++w) {
            fill(s + (size_t)w * size, size, r->seed * 31u + (unsigned)w + (unsigned)r->rank);
            MPI_Isend(s + (size_t)w * size, (int)size, MPI_BYTE, r->peer, 2, MPI_COMM_WORLD,
                      &reqs[nreq++]);
        }
    }
    if (!r->sender || bidir) {
        for (w = 0; w < win; ++w) {
            MPI_Irecv(r->rbuf + (size_t)w * size, (int)size, MPI_BYTE, r->peer, 2,
                      MPI_COMM_WORLD, &reqs[nreq++]);
        }
    }
    MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
    if (!r->sender || bidir) {
        for (w = 0; w < win; ++w) {
            errors += check(r->rbuf + (size_t)w * size, size,
                            r->seed * 31u + (unsigned)w + (unsigned)r->peer);
        }
    }
    if (!r->sender) {
        MPI_Send(&ack, 1, MPI_BYTE, r->peer, 3, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&ack, 1, MPI_BYTE, r->peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    put_buf(s, fresh);
    return errors;
}

/* The slowest rank's seconds since T0: every rank gets the same figure. */
static double elapsed(double t0)
{
    double dt = MPI_Wtime() - t0, dt_max = 0;
    MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return dt_max;
}

/* One size of one test: the figure (usec or MB/s) in *value; returns the
 * data errors seen (bw, bibw: summed on rank 0). With a budget, the
 * warm-up times a step and the timed steps are cut to what fits in it
 * (never fewer than NMIN): on a loaded host the rounds, not long runs,
 * are what makes a figure trustworthy. */
static unsigned long measure(struct run *r, const char *test, size_t size, int fresh,
                             double *value)
{
    int lat = !strcmp(test, "lat"), bidir = !strcmp(test, "bibw");
    int n = r->iters, warm, nmin, win = 1, i;
    double t0, dt;
    unsigned long errors = 0;
    if (size > 8192) {
        n = (int)(r->bytes / size);
    }
    if (n < 5) n = 5;
    if (lat) {
        warm = n / 10 + 1;
        if ((r->budget > 0) && (warm > 10)) warm = 10;
        nmin = 5;
    } else {
        win = r->window;
        if ((size_t)win * size > (64u << 20)) {
            win = (int)((64u << 20) / size);
            if (win < 1) win = 1;
        }
        if (win > 256) win = 256;
        n = n / win + 2;
        warm = 1;
        nmin = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);

    t0 = MPI_Wtime();
    for (i = 0; i < warm; ++i) {
        errors += lat ? lat_step(r, size, fresh) : win_step(r, size, fresh, win, bidir);
    }
    if (r->budget > 0) {
        /* the same figure on every rank: the same count */
        dt = elapsed(t0) / warm;
        if ((dt > 0) && (r->budget / dt < n)) n = (int)(r->budget / dt);
        if (n < nmin) n = nmin;
    }
    t0 = MPI_Wtime();
    for (i = 0; i < n; ++i) {
        errors += lat ? lat_step(r, size, fresh) : win_step(r, size, fresh, win, bidir);
    }
    if (lat) {
        *value = (MPI_Wtime() - t0) * 1e6 / (2.0 * n);
    } else {
        unsigned long e_all = 0;
        dt = elapsed(t0);
        *value = (double)size * win * n * (bidir ? 2 : 1) * (r->nranks / 2) / dt / 1e6;
        MPI_Reduce(&errors, &e_all, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        errors = e_all;
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
    size_t min = 1, max = 4u << 20, size, bufsize = 0;
    int fresh = 0, quiet = 0, opt, bad = 0;
    struct run r = {.iters = 1000, .window = 16, .seed = 1};
    unsigned long errors = 0, total_errors = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.nranks);
    while ((opt = getopt(argc, argv, "t:s:S:i:b:T:w:Fq")) != -1) {
        switch (opt) {
        case 't':
            if (ntests == max_jobs) bad = 1;
            else tests[ntests++] = optarg;
            break;
        case 's': min = strtoul(optarg, NULL, 0); break;
        case 'S': max = strtoul(optarg, NULL, 0); break;
        case 'i': r.iters = atoi(optarg); break;
        case 'b': r.bytes = strtoul(optarg, NULL, 0); bad |= r.bytes == 0; break;
        case 'T': r.budget = atof(optarg); bad |= !(r.budget > 0); break;
        case 'w': r.window = atoi(optarg); break;
        case 'F': fresh = 1; break;
        case 'q': quiet = 1; break;
        default:
            if (r.rank == 0) fprintf(stderr, "bad option\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((r.bytes == 0) && (r.iters > 0)) {
        r.bytes = (size_t)r.iters * 8192;
    }
    if (ntests == 0) {
        tests[ntests++] = "lat";
    }
    njobs = ntests;
    for (jn = 0; jn < njobs; ++jn) {
        bad |= parse_job(&jobs[jn], tests[jn], min, max, fresh) != 0;
        bad |= !strcmp(jobs[jn].test, "lat") && (r.nranks != 2);
        for (k = 0; !bad && (k < jobs[jn].nsizes); ++k) {
            if (jobs[jn].sizes[k] > bufsize) bufsize = jobs[jn].sizes[k];
        }
    }
    if (bad || (r.nranks < 2) || (r.nranks % 2) || (r.iters < 1) || (r.window < 1)) {
        if (r.rank == 0) fprintf(stderr, "usage: 2 ranks (lat) or 2N (bw, bibw); -t lat|bw|bibw[-fresh][=SIZE,...] (at most %d), 0 < -s <= -S\n", max_jobs);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    r.peer = (r.rank + r.nranks / 2) % r.nranks;   /* 2 ranks: the other one */
    r.sender = r.rank < r.nranks / 2;
    r.sbuf = malloc(bufsize * (size_t)r.window);
    r.rbuf = malloc(bufsize * (size_t)r.window);
    if ((r.sbuf == NULL) || (r.rbuf == NULL)) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (jn = 0; jn < njobs; ++jn) {
        if ((r.rank == 0) && !quiet) {
            printf("# zv_osu %s%s, %d pair(s): %ssize  %s  errors\n", jobs[jn].test,
                   jobs[jn].fresh ? " (fresh buffers)" : "", r.nranks / 2, (njobs > 1) ? "test  " : "",
                   strcmp(jobs[jn].test, "lat") ? "MB/s" : "usec");
        }
        for (k = 0; k < jobs[jn].nsizes; ++k) {
            unsigned long e_all = 0;
            double value;
            size = jobs[jn].sizes[k];
            errors = measure(&r, jobs[jn].test, size, jobs[jn].fresh, &value);
            if (r.rank == 0) {
                if (njobs > 1) {
                    printf("%s ", jobs[jn].name);
                }
                /* (below 1, e.g. 8-byte MB/s: enough digits to compare) */
                printf("%zu %.*f %lu\n", size, (value < 1) ? 4 : 2, value, errors);
            }
            MPI_Allreduce(&errors, &e_all, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
            total_errors += e_all;
            fflush(stdout);
        }
    }
    if ((r.rank == 0) && total_errors) {
        fprintf(stderr, "zv_osu: %lu message(s) arrived corrupted\n", total_errors);
    }
    free(r.sbuf);
    free(r.rbuf);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
