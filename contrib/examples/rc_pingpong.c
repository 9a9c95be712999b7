/* SPDX-License-Identifier: BSD-3-Clause */
/* A verbs RC ping-pong whose buffers are registered through libzverbs' cache, validated at the receiver.
 *
 *   server:  rc_pingpong [options]
 *   client:  rc_pingpong [options] SERVER_HOST
 *
 * Each side sends from, and receives into, memory it registers with
 * zv_cache_get() for that message only (zv_cache_put() after the
 * completion): freshly malloc()ed buffers, and one long-lived buffer whose
 * pages are replaced between messages — munmap + mmap(MAP_FIXED) at the same
 * address, madvise(MADV_DONTNEED), an mremap shrink and regrow, mmap(MAP_FIXED)
 * over part of it — by direct system calls (syscall(2), which no interposer
 * sees; -l: through libc instead). Then it writes a pattern unique to the
 * message. A cache that handed out the registration of the old pages would
 * make the device send the previous message's bytes: the receiver checks
 * every byte, and any mismatch makes the exit status 1.
 *
 * The QP information (QPN, PSN, GID) is exchanged over a TCP connection,
 * which also tells the sender when the receive is posted.
 *
 * Options: -d DEVICE (first device) -i PORT (1) -g GID_INDEX (the first
 * IPv4-mapped GID, else 0) -p TCP_PORT (18515) -n ITERATIONS (100)
 * -s SIZE (262144) -m MONITOR (auto|uffd|ucm|none, default auto) -l
 * Build: cc rc_pingpong.c $(pkg-config --cflags --libs zverbs)
 */
#define _GNU_SOURCE
#include <zverbs/zverbs.h>

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

struct opts {
    const char *dev, *host, *monitor;
    int         ib_port, gid_index, tcp_port, iters, use_libc;
    size_t      size;
};

/* What a side tells its peer. */
struct qp_info {
    uint32_t qpn, psn;
    uint16_t lid;
    uint8_t  gid[16];
};

struct ctx {
    struct ibv_context *ctx;
    struct ibv_pd      *pd;
    struct ibv_cq      *cq;
    struct ibv_qp      *qp;
    zv_cache_t         *cache;
    enum ibv_mtu        mtu;
    int                 sock;
};

static int die_errno(const char *what)
{
    fprintf(stderr, "rc_pingpong: %s: %s\n", what, strerror(errno));
    return -1;
}

/* ---------------------------------------------------------------- memory */

/* The pattern of message `iter` from side `side` at byte `off`. */
static uint8_t pattern(int side, int iter, size_t off)
{
    return (uint8_t)(side * 101 + iter * 31 + off * 7 + (off >> 12) * 13 + 1);
}

static void fill(uint8_t *p, size_t len, int side, int iter)
{
    for (size_t i = 0; i < len; ++i) {
        p[i] = pattern(side, iter, i);
    }
}

static void *sys_mmap_fixed(void *at, size_t len, int use_libc)
{
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
    return use_libc ? mmap(at, len, PROT_READ | PROT_WRITE, flags, -1, 0) :
                      (void *)syscall(SYS_mmap, at, len, PROT_READ | PROT_WRITE, flags, -1, 0);
}

static long sys_call3(long nr, void *a, size_t b, long c, int use_libc)
{
    if (use_libc) {
        switch (nr) {
        case SYS_munmap:
            return munmap(a, b);
        case SYS_madvise:
            return madvise(a, b, (int)c);
        }
    }
    return syscall(nr, a, b, c);
}

/* Replaces the pages under buf[0, len) in the way `how` says; 0 or -1. */
static int replace_pages(uint8_t *buf, size_t len, int how, int use_libc)
{
    switch (how) {
    case 0: /* munmap, then mmap(MAP_FIXED) at the same address */
        if (sys_call3(SYS_munmap, buf, len, 0, use_libc) != 0) {
            return die_errno("munmap");
        }
        return (sys_mmap_fixed(buf, len, use_libc) == buf) ? 0 : die_errno("mmap(MAP_FIXED)");
    case 1: /* drop the pages: the next touch gets zero-filled new ones */
        return (sys_call3(SYS_madvise, buf, len, MADV_DONTNEED, use_libc) == 0) ?
                       0 : die_errno("madvise(MADV_DONTNEED)");
    case 2: { /* mremap: shrink to half (unmaps the tail), then grow back in place */
        void *p = use_libc ? mremap(buf, len, len / 2, 0) :
                             (void *)syscall(SYS_mremap, buf, len, len / 2, 0);
        if (p != buf) {
            return die_errno("mremap(shrink)");
        }
        p = use_libc ? mremap(buf, len / 2, len, 0) :
                       (void *)syscall(SYS_mremap, buf, len / 2, len, 0);
        if (p == buf) {
            return 0;
        }
        /* Something took the tail meanwhile: map it again ourselves. */
        return (sys_mmap_fixed(buf + len / 2, len - len / 2, use_libc) == buf + len / 2) ?
                       0 : die_errno("mremap(grow)/mmap(tail)");
    }
    case 3: /* a new mapping over the middle pages */
        return (sys_mmap_fixed(buf + PAGE, len - 2 * PAGE, use_libc) == buf + PAGE) ?
                       0 : die_errno("mmap(MAP_FIXED) over the middle");
    default: /* no change: a cache hit on the same pages */
        return 0;
    }
}

/* ---------------------------------------------------------------- verbs */

static int pick_gid(struct ctx *c, int port, int wanted)
{
    struct ibv_port_attr pa;
    union ibv_gid        gid;
    if (wanted >= 0) {
        return wanted;
    }
    if (ibv_query_port(c->ctx, (uint8_t)port, &pa) != 0) {
        return 0;
    }
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if ((ibv_query_gid(c->ctx, (uint8_t)port, i, &gid) == 0) &&
            (memcmp(gid.raw, v4mapped, sizeof(v4mapped)) == 0)) {
            return i;
        }
    }
    return 0;
}

static int open_verbs(struct ctx *c, const struct opts *o)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_device  *dev  = NULL;
    if (list == NULL) {
        return die_errno("ibv_get_device_list");
    }
    for (int i = 0; list[i] != NULL; ++i) {
        if ((o->dev == NULL) || (strcmp(ibv_get_device_name(list[i]), o->dev) == 0)) {
            dev = list[i];
            break;
        }
    }
    if (dev == NULL) {
        fprintf(stderr, "rc_pingpong: no verbs device %s\n", o->dev ? o->dev : "at all");
        ibv_free_device_list(list);
        return -1;
    }
    c->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (c->ctx == NULL) {
        return die_errno("ibv_open_device");
    }
    struct ibv_port_attr pa;
    if (ibv_query_port(c->ctx, (uint8_t)o->ib_port, &pa) != 0) {
        return die_errno("ibv_query_port");
    }
    c->mtu = pa.active_mtu;
    if ((c->pd = ibv_alloc_pd(c->ctx)) == NULL) {
        return die_errno("ibv_alloc_pd");
    }
    if ((c->cq = ibv_create_cq(c->ctx, 4, NULL, NULL, 0)) == NULL) {
        return die_errno("ibv_create_cq");
    }
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq          = c->cq;
    ia.recv_cq          = c->cq;
    ia.qp_type          = IBV_QPT_RC;
    ia.cap.max_send_wr  = 1;
    ia.cap.max_recv_wr  = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    if ((c->qp = ibv_create_qp(c->pd, &ia)) == NULL) {
        return die_errno("ibv_create_qp");
    }
    return 0;
}

/* INIT -> RTR -> RTS towards the peer. */
static int connect_qp(struct ctx *c, const struct opts *o, int gid_index,
                      const struct qp_info *me, const struct qp_info *peer)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state        = IBV_QPS_INIT;
    a.port_num        = (uint8_t)o->ib_port;
    a.pkey_index      = 0;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
    if ((errno = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                             IBV_QP_ACCESS_FLAGS)) != 0) {
        return die_errno("ibv_modify_qp(INIT)");
    }
    memset(&a, 0, sizeof(a));
    a.qp_state              = IBV_QPS_RTR;
    a.path_mtu              = c->mtu;
    a.dest_qp_num           = peer->qpn;
    a.rq_psn                = peer->psn;
    a.max_dest_rd_atomic    = 1;
    a.min_rnr_timer         = 12;
    a.ah_attr.dlid          = peer->lid;
    a.ah_attr.port_num      = (uint8_t)o->ib_port;
    a.ah_attr.is_global     = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    if ((errno = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                             IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                             IBV_QP_MAX_DEST_RD_ATOMIC |
                                             IBV_QP_MIN_RNR_TIMER)) != 0) {
        return die_errno("ibv_modify_qp(RTR)");
    }
    memset(&a, 0, sizeof(a));
    a.qp_state      = IBV_QPS_RTS;
    a.timeout       = 14;
    a.retry_cnt     = 7;
    a.rnr_retry     = 7;
    a.sq_psn        = me->psn;
    a.max_rd_atomic = 1;
    if ((errno = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                             IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                             IBV_QP_MAX_QP_RD_ATOMIC)) != 0) {
        return die_errno("ibv_modify_qp(RTS)");
    }
    return 0;
}

/* One completion of the expected opcode within 20 s. */
static int wait_completion(struct ctx *c, enum ibv_wc_opcode op)
{
    struct ibv_wc   wc;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = ibv_poll_cq(c->cq, 1, &wc);
        if (n < 0) {
            fprintf(stderr, "rc_pingpong: ibv_poll_cq failed\n");
            return -1;
        }
        if (n == 1) {
            if ((wc.status != IBV_WC_SUCCESS) || (wc.opcode != op)) {
                fprintf(stderr, "rc_pingpong: completion %s, opcode %d\n",
                        ibv_wc_status_str(wc.status), (int)wc.opcode);
                return -1;
            }
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 20) {
            fprintf(stderr, "rc_pingpong: no completion in 20 s\n");
            return -1;
        }
    }
}

/* ---------------------------------------------------------------- TCP */

static int tcp_connect(const struct opts *o)
{
    struct addrinfo hints, *res, *ai;
    char            port[16];
    int             fd = -1;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", o->tcp_port);
    if (o->host == NULL) {
        hints.ai_flags = AI_PASSIVE;
    }
    if (getaddrinfo(o->host, port, &hints, &res) != 0) {
        fprintf(stderr, "rc_pingpong: cannot resolve %s\n", o->host ? o->host : "(any)");
        return -1;
    }
    for (ai = res; (ai != NULL) && (fd < 0); ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        if (o->host != NULL) {
            /* The server may not listen yet: retry for 10 s. */
            int tries = 100;
            while ((connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) && (--tries > 0)) {
                usleep(100000);
            }
            if (tries == 0) {
                close(fd);
                fd = -1;
            }
        } else {
            int one = 1, lfd = fd;
            setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            fd = ((bind(lfd, ai->ai_addr, ai->ai_addrlen) == 0) && (listen(lfd, 1) == 0)) ?
                         accept(lfd, NULL, NULL) : -1;
            close(lfd);
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        return die_errno(o->host ? "connect" : "bind/listen/accept");
    }
    return fd;
}

static int xfer(int fd, void *buf, size_t len, int out)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = out ? write(fd, (char *)buf + done, len - done) :
                          read(fd, (char *)buf + done, len - done);
        if (n <= 0) {
            return (n < 0) ? die_errno("tcp") : -1;
        }
        done += (size_t)n;
    }
    return 0;
}

/* ---------------------------------------------------------------- messages */

static int reg(struct ctx *c, void *p, size_t len, zv_region_t **r)
{
    int rc = zv_cache_get(c->cache, p, len, IBV_ACCESS_LOCAL_WRITE, r);
    if (rc != 0) {
        fprintf(stderr, "rc_pingpong: zv_cache_get(%p, %zu): %s\n", p, len, zv_strerror(rc));
    }
    return rc;
}

/* Receives message `iter` from `side` into a fresh buffer; counts bad bytes. */
static int receive(struct ctx *c, const struct opts *o, int side, int iter, size_t *bad)
{
    uint8_t     *buf = malloc(o->size);
    zv_region_t *r   = NULL;
    char         ready = 'r';
    int          rc    = -1;
    if (buf == NULL) {
        return die_errno("malloc");
    }
    memset(buf, 0, o->size);
    if (reg(c, buf, o->size, &r) == 0) {
        struct ibv_sge     sge = {(uintptr_t)buf, (uint32_t)o->size, zv_region_lkey(r)};
        struct ibv_recv_wr wr, *badwr;
        memset(&wr, 0, sizeof(wr));
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if ((errno = ibv_post_recv(c->qp, &wr, &badwr)) != 0) {
            die_errno("ibv_post_recv");
        } else if ((xfer(c->sock, &ready, 1, 1) == 0) &&
                   (wait_completion(c, IBV_WC_RECV) == 0)) {
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < o->size; ++i) {
                if (buf[i] != pattern(side, iter, i)) {
                    first = wrong ? first : i;
                    ++wrong;
                }
            }
            if (wrong != 0) {
                fprintf(stderr, "rc_pingpong: message %d: %zu of %zu bytes wrong, first at "
                        "offset %zu (got 0x%02x, want 0x%02x): stale data\n", iter, wrong,
                        o->size, first, buf[first], pattern(side, iter, first));
            }
            *bad += wrong;
            rc = 0;
        }
        zv_cache_put(c->cache, r);
    }
    free(buf);
    return rc;
}

/* Sends message `iter` from buf (already holding its pattern). */
static int send_from(struct ctx *c, const struct opts *o, uint8_t *buf)
{
    zv_region_t *r = NULL;
    char         ready;
    int          rc = -1;
    if (reg(c, buf, o->size, &r) != 0) {
        return -1;
    }
    struct ibv_sge     sge = {(uintptr_t)buf, (uint32_t)o->size, zv_region_lkey(r)};
    struct ibv_send_wr wr, *badwr;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.opcode     = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (xfer(c->sock, &ready, 1, 0) == 0) { /* the peer's receive is posted */
        if ((errno = ibv_post_send(c->qp, &wr, &badwr)) != 0) {
            die_errno("ibv_post_send");
        } else {
            rc = wait_completion(c, IBV_WC_SEND);
        }
    }
    zv_cache_put(c->cache, r);
    return rc;
}

/* Message `iter` of this side: from a fresh malloc() buffer (even iterations)
 * or from the long-lived buffer after its pages were replaced (odd ones). */
static int send_message(struct ctx *c, const struct opts *o, int side, int iter, uint8_t *lasting)
{
    if ((iter % 2) == 0) {
        uint8_t *fresh = malloc(o->size);
        int      rc;
        if (fresh == NULL) {
            return die_errno("malloc");
        }
        fill(fresh, o->size, side, iter);
        rc = send_from(c, o, fresh);
        free(fresh);
        return rc;
    }
    if (replace_pages(lasting, o->size, (iter / 2) % 5, o->use_libc) != 0) {
        return -1;
    }
    fill(lasting, o->size, side, iter);
    return send_from(c, o, lasting);
}

static int usage(void)
{
    fprintf(stderr, "usage: rc_pingpong [-d dev] [-i ib_port] [-g gid_index] [-p tcp_port] "
                    "[-n iters] [-s size] [-m auto|uffd|ucm|none] [-l] [server_host]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct opts o = {NULL, NULL, NULL, 1, -1, 18515, 100, 0, 262144};
    struct ctx  c;
    int         opt;
    memset(&c, 0, sizeof(c));
    c.sock = -1;
    while ((opt = getopt(argc, argv, "d:i:g:p:n:s:m:l")) != -1) {
        switch (opt) {
        case 'd': o.dev = optarg; break;
        case 'i': o.ib_port = atoi(optarg); break;
        case 'g': o.gid_index = atoi(optarg); break;
        case 'p': o.tcp_port = atoi(optarg); break;
        case 'n': o.iters = atoi(optarg); break;
        case 's': o.size = strtoul(optarg, NULL, 0); break;
        case 'm': o.monitor = optarg; break;
        case 'l': o.use_libc = 1; break;
        default: return usage();
        }
    }
    if (optind < argc) {
        o.host = argv[optind];
    }
    if ((o.size < 4 * PAGE) || (o.size % PAGE != 0) || (o.iters < 1)) {
        fprintf(stderr, "rc_pingpong: -s wants a multiple of %lu of at least 4 pages\n", PAGE);
        return 2;
    }
    const int              side    = (o.host == NULL) ? 0 : 1; /* server 0, client 1 */
    int                    status  = 1, rc, gid_index;
    size_t                 bad     = 0;
    uint8_t               *lasting = MAP_FAILED;
    struct zv_cache_params params;
    struct zv_cache_stats  st;
    struct ibv_port_attr   pa;
    union ibv_gid          gid;
    struct qp_info         me, peer;

    if (open_verbs(&c, &o) != 0) {
        goto out;
    }
    zv_cache_params_init(&params);
    params.monitor = o.monitor;
    rc             = zv_cache_open(c.pd, &params, &c.cache);
    if (rc != 0) {
        fprintf(stderr, "rc_pingpong: zv_cache_open(monitor %s): %s\n",
                o.monitor ? o.monitor : "auto", zv_strerror(rc));
        goto out;
    }
    lasting = mmap(NULL, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (lasting == MAP_FAILED) {
        die_errno("mmap");
        goto out;
    }

    /* Exchange QP information. */
    gid_index = pick_gid(&c, o.ib_port, o.gid_index);
    if ((ibv_query_port(c.ctx, (uint8_t)o.ib_port, &pa) != 0) ||
        (ibv_query_gid(c.ctx, (uint8_t)o.ib_port, gid_index, &gid) != 0)) {
        die_errno("ibv_query_port/gid");
        goto out;
    }
    srand48(getpid() * time(NULL));
    memset(&me, 0, sizeof(me));
    me.qpn = htonl(c.qp->qp_num);
    me.psn = htonl((uint32_t)lrand48() & 0xffffff);
    me.lid = htons(pa.lid);
    memcpy(me.gid, gid.raw, 16);
    if ((c.sock = tcp_connect(&o)) < 0) {
        goto out;
    }
    if ((xfer(c.sock, &me, sizeof(me), 1) != 0) || (xfer(c.sock, &peer, sizeof(peer), 0) != 0)) {
        goto out;
    }
    me.qpn = ntohl(me.qpn); me.psn = ntohl(me.psn); me.lid = ntohs(me.lid);
    peer.qpn = ntohl(peer.qpn); peer.psn = ntohl(peer.psn); peer.lid = ntohs(peer.lid);
    if (connect_qp(&c, &o, gid_index, &me, &peer) != 0) {
        goto out;
    }

    /* The client pings, the server pongs; both validate what they receive. */
    for (int i = 0; i < o.iters; ++i) {
        int failed = (side == 1) ? (send_message(&c, &o, side, i, lasting) ||
                                    receive(&c, &o, 1 - side, i, &bad)) :
                                   (receive(&c, &o, 1 - side, i, &bad) ||
                                    send_message(&c, &o, side, i, lasting));
        if (failed) {
            fprintf(stderr, "rc_pingpong: message %d failed\n", i);
            goto out;
        }
    }
    memset(&st, 0, sizeof(st));
    (void)zv_cache_read_stats(c.cache, &st, sizeof(st));
    printf("rc_pingpong %s: %d messages of %zu bytes each way, monitor %s (%s calls): "
           "%zu bad bytes; cache: %llu registrations, %llu misses, %llu invalidations, "
           "%llu uncached\n",
           side ? "client" : "server", o.iters, o.size, zv_cache_monitor(c.cache),
           o.use_libc ? "libc" : "direct system", bad, (unsigned long long)st.registrations,
           (unsigned long long)st.misses, (unsigned long long)st.invalidations,
           (unsigned long long)st.uncached);
    status = (bad == 0) ? 0 : 1;

out:
    if (c.sock >= 0) {
        close(c.sock);
    }
    if (c.qp != NULL) {
        ibv_destroy_qp(c.qp);
    }
    if (c.cache != NULL) {
        rc = zv_cache_close(c.cache);
        if (rc != 0) {
            fprintf(stderr, "rc_pingpong: zv_cache_close: %s\n", zv_strerror(rc));
            status = 1;
        }
    }
    if (lasting != MAP_FAILED) {
        munmap(lasting, o.size);
    }
    if (c.cq != NULL) {
        ibv_destroy_cq(c.cq);
    }
    if (c.pd != NULL) {
        ibv_dealloc_pd(c.pd);
    }
    if (c.ctx != NULL) {
        ibv_close_device(c.ctx);
    }
    return status;
}
