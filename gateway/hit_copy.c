/* gateway/hit_copy.c - cache hits of more than 128 KiB, up to 4 MiB, are read
 * into memory and go out with their response headers in one send.
 *
 * A file response from libmicrohttpd 0.9.75 is its headers, pushed in a TCP
 * segment of their own, then the file by sendfile in 128 KiB pieces with a
 * turn of its epoll loop between two pieces. A body that takes one piece
 * goes out well: at 128 KiB and 64 KiB sendfile measured 1.2-1.3x the copy.
 * A body that takes more does not, on this machine (loopback, the client on
 * the same two cores; bench/hits_wire.py, bench/results/hits-wire.md):
 * against the same hits read into memory and sent with their headers in one
 * sendmsg, sendfile served 0.45x at 192 and 256 KiB, 0.55-0.59x at 1 MiB
 * (c = 8 and 64) and 0.65x at 4 MiB. With it came 0.6-0.9 cores of softirq
 * against 0.2-0.35, 37 TCP segments per 1 MiB response against 20, and at 64
 * connections a tail loss probe (a spurious retransmission) per response.
 * nginx's own `sendfile off` served 1.15-1.74x its default at 256 KiB,
 * 1 MiB and 4 MiB in the same runs (0.73x at 192 KiB: nginx swings widely
 * between sizes here). Sending two pieces in one sendfile call (2 MiB pieces,
 * the last one left to libmicrohttpd) measured level, so the copy it is. It
 * costs the gateway's threads 100-200 us of CPU per MiB (the softirq time it
 * saves is not theirs); over a real network, where that may weigh more than
 * the kernel's work it saves here, cache.read_path "sendfile" turns it off.
 *
 * Memory is bounded: the buffers held by responses not yet sent total at
 * most the budget (64 MiB); a hit over it goes by sendfile. Objects above
 * 4 MiB always do (a buffer per response would be too much memory for too
 * few of them), and HEADs read nothing. Hits of at most 16 KiB are the
 * memory tier's (cache.memory). */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gw_int.h"

struct gw_hit_copy {
    uint64_t budget;
    atomic_uint_fast64_t held;      /* bytes of buffers given out, not yet released */
    atomic_uint_fast64_t sent[2];   /* hits by copy, by sendfile */
};

/* Each buffer starts with this, so its release needs nothing else. */
struct copy_head {
    struct gw_hit_copy *hc;
    uint64_t len;
    _Alignas(16) unsigned char data[];
};

struct gw_hit_copy *gw_hit_copy_new(uint64_t budget)
{
    struct gw_hit_copy *hc = calloc(1, sizeof *hc);
    if (hc)
        hc->budget = budget;
    return hc;
}

void gw_hit_copy_free(struct gw_hit_copy *hc)
{
    free(hc);
}

bool gw_hit_copy_wanted(const struct conf *c, uint64_t len)
{
    return c->cache_read_path == CONF_READ_COPY && len >= GW_HIT_COPY_MIN &&
           len <= GW_HIT_COPY_MAX;
}

void *gw_hit_copy_take(struct gw_hit_copy *hc, int fd, uint64_t at, uint64_t len)
{
    if (!hc || atomic_fetch_add(&hc->held, len) + len > hc->budget) {
        if (hc)
            atomic_fetch_sub(&hc->held, len);
        return NULL;
    }
    struct copy_head *h = malloc(sizeof *h + len);
    if (!h) {
        atomic_fetch_sub(&hc->held, len);
        return NULL;
    }
    h->hc = hc;
    h->len = len;
    uint64_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, h->data + got, len - got, (off_t)(at + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;   /* an error or a short file: the caller sends the file instead */
        got += (uint64_t)n;
    }
    if (got < len) {
        gw_hit_copy_release(h->data);
        return NULL;
    }
    return h->data;
}

void gw_hit_copy_release(void *buf)
{
    struct copy_head *h = (struct copy_head *)((unsigned char *)buf - offsetof(struct copy_head,
                                                                                data));
    atomic_fetch_sub(&h->hc->held, h->len);
    free(h);
}

void gw_hit_copy_count(struct gw_hit_copy *hc, bool copied)
{
    if (hc)
        atomic_fetch_add(&hc->sent[copied ? 0 : 1], 1);
}

void gw_hit_copy_stats(const struct gw_hit_copy *hc, uint64_t *copied, uint64_t *sendfile,
                       uint64_t *held)
{
    *copied = hc ? atomic_load(&hc->sent[0]) : 0;
    *sendfile = hc ? atomic_load(&hc->sent[1]) : 0;
    *held = hc ? atomic_load(&hc->held) : 0;
}
