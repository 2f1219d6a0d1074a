/* common/md5.c - MD5 with concurrent streams hashed in AVX2 lanes (md5.h).
 *
 * Three parts: the lane kernel (eight streams, one block each per round,
 * RFC 1321's steps on 32-bit lanes), OpenSSL for a stream hashed alone,
 * and the engine that gathers the streams of concurrent threads into the
 * lanes. */
#define OPENSSL_SUPPRESS_DEPRECATED   /* MD5_Update on a bare state: the one-stream path */

#include "md5.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <openssl/md5.h>

#include "common_int.h"
#include "le.h"

enum {
    LANES = 8,
    /* Blocks per lane between two looks at the queue: 4 KiB, ~10 us on
     * this CPU - how long a stream that arrives waits for a free lane. */
    STEP_BLOCKS = 64,
    /* Fewer whole blocks than this are hashed on the caller's thread: the
     * hand-over would cost more than the lanes save. */
    MIN_ENGINE_BLOCKS = 16,
    /* The lanes cost one kernel pass per step however many are busy: ~4
     * CPU-s per GiB-per-lane, against OpenSSL's 1.8 for one stream alone
     * (bench/results/md5-lanes.md). Streams therefore go to the engine
     * only when at least this many threads hash at once; fewer hash alone,
     * side by side, on cores of their own. */
    JOIN_AT = 4,
    /* A thread hashing alone looks again after this many blocks (16 KiB)
     * whether enough others came to make the lanes pay. */
    SLICE_BLOCKS = 256,
};

static const uint32_t MD5_INIT[4] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476 };

/* ---- one stream: OpenSSL's block function over our state ---- */

static void blocks_alone(uint32_t h[4], const uint8_t *p, size_t nblocks)
{
    MD5_CTX c;
    memset(&c, 0, sizeof c);
    c.A = h[0];
    c.B = h[1];
    c.C = h[2];
    c.D = h[3];
    /* num is 0 and the length whole blocks: MD5_Update runs the block
     * function over p directly and keeps nothing back */
    MD5_Update(&c, p, nblocks * 64);
    h[0] = c.A;
    h[1] = c.B;
    h[2] = c.C;
    h[3] = c.D;
}

/* ---- eight streams: one block of each per round, lane i = stream i ---- */

#define ROTL(x, s) _mm256_or_si256(_mm256_slli_epi32((x), (s)), _mm256_srli_epi32((x), 32 - (s)))
#define FF(b, c, d) _mm256_xor_si256((d), _mm256_and_si256((b), _mm256_xor_si256((c), (d))))
#define GG(b, c, d) _mm256_xor_si256((c), _mm256_and_si256((d), _mm256_xor_si256((b), (c))))
#define HH(b, c, d) _mm256_xor_si256(_mm256_xor_si256((b), (c)), (d))
#define II(b, c, d) _mm256_xor_si256((c), _mm256_or_si256((b), _mm256_xor_si256((d), ones)))
#define STEP(f, a, b, c, d, k, t, s)                                              \
    do {                                                                          \
        a = _mm256_add_epi32(a, _mm256_add_epi32(w[k], _mm256_set1_epi32((int)(t)))); \
        a = _mm256_add_epi32(a, f(b, c, d));                                      \
        a = _mm256_add_epi32(b, ROTL(a, s));                                      \
    } while (0)

/* The 8x8 transpose of 32-bit words: r[i] holds lane i's eight words in,
 * out[j] holds word j of every lane. */
__attribute__((target("avx2")))
static inline void transpose8(const __m256i r[8], __m256i out[8])
{
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    out[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    out[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    out[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    out[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    out[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    out[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    out[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    out[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* h[i] is lane i's state, p[i] its next block; every lane hashes nblocks
 * blocks. An idle lane points at a block of its own and a state nobody
 * reads (the caller's business). */
__attribute__((target("avx2")))
static void blocks_in_lanes(uint32_t *const h[LANES], const uint8_t *const p[LANES],
                            size_t nblocks)
{
    const __m256i ones = _mm256_set1_epi32(-1);
    __m256i a = _mm256_setr_epi32((int)h[0][0], (int)h[1][0], (int)h[2][0], (int)h[3][0],
                                  (int)h[4][0], (int)h[5][0], (int)h[6][0], (int)h[7][0]);
    __m256i b = _mm256_setr_epi32((int)h[0][1], (int)h[1][1], (int)h[2][1], (int)h[3][1],
                                  (int)h[4][1], (int)h[5][1], (int)h[6][1], (int)h[7][1]);
    __m256i c = _mm256_setr_epi32((int)h[0][2], (int)h[1][2], (int)h[2][2], (int)h[3][2],
                                  (int)h[4][2], (int)h[5][2], (int)h[6][2], (int)h[7][2]);
    __m256i d = _mm256_setr_epi32((int)h[0][3], (int)h[1][3], (int)h[2][3], (int)h[3][3],
                                  (int)h[4][3], (int)h[5][3], (int)h[6][3], (int)h[7][3]);
    for (size_t blk = 0; blk < nblocks; blk++) {
        __m256i w[16], r[8];
        size_t off = blk * 64;
        for (int i = 0; i < LANES; i++)
            r[i] = _mm256_loadu_si256((const __m256i *)(p[i] + off));
        transpose8(r, w);
        for (int i = 0; i < LANES; i++)
            r[i] = _mm256_loadu_si256((const __m256i *)(p[i] + off + 32));
        transpose8(r, w + 8);
        __m256i a0 = a, b0 = b, c0 = c, d0 = d;

        STEP(FF, a, b, c, d, 0, 0xd76aa478, 7);
        STEP(FF, d, a, b, c, 1, 0xe8c7b756, 12);
        STEP(FF, c, d, a, b, 2, 0x242070db, 17);
        STEP(FF, b, c, d, a, 3, 0xc1bdceee, 22);
        STEP(FF, a, b, c, d, 4, 0xf57c0faf, 7);
        STEP(FF, d, a, b, c, 5, 0x4787c62a, 12);
        STEP(FF, c, d, a, b, 6, 0xa8304613, 17);
        STEP(FF, b, c, d, a, 7, 0xfd469501, 22);
        STEP(FF, a, b, c, d, 8, 0x698098d8, 7);
        STEP(FF, d, a, b, c, 9, 0x8b44f7af, 12);
        STEP(FF, c, d, a, b, 10, 0xffff5bb1, 17);
        STEP(FF, b, c, d, a, 11, 0x895cd7be, 22);
        STEP(FF, a, b, c, d, 12, 0x6b901122, 7);
        STEP(FF, d, a, b, c, 13, 0xfd987193, 12);
        STEP(FF, c, d, a, b, 14, 0xa679438e, 17);
        STEP(FF, b, c, d, a, 15, 0x49b40821, 22);

        STEP(GG, a, b, c, d, 1, 0xf61e2562, 5);
        STEP(GG, d, a, b, c, 6, 0xc040b340, 9);
        STEP(GG, c, d, a, b, 11, 0x265e5a51, 14);
        STEP(GG, b, c, d, a, 0, 0xe9b6c7aa, 20);
        STEP(GG, a, b, c, d, 5, 0xd62f105d, 5);
        STEP(GG, d, a, b, c, 10, 0x02441453, 9);
        STEP(GG, c, d, a, b, 15, 0xd8a1e681, 14);
        STEP(GG, b, c, d, a, 4, 0xe7d3fbc8, 20);
        STEP(GG, a, b, c, d, 9, 0x21e1cde6, 5);
        STEP(GG, d, a, b, c, 14, 0xc33707d6, 9);
        STEP(GG, c, d, a, b, 3, 0xf4d50d87, 14);
        STEP(GG, b, c, d, a, 8, 0x455a14ed, 20);
        STEP(GG, a, b, c, d, 13, 0xa9e3e905, 5);
        STEP(GG, d, a, b, c, 2, 0xfcefa3f8, 9);
        STEP(GG, c, d, a, b, 7, 0x676f02d9, 14);
        STEP(GG, b, c, d, a, 12, 0x8d2a4c8a, 20);

        STEP(HH, a, b, c, d, 5, 0xfffa3942, 4);
        STEP(HH, d, a, b, c, 8, 0x8771f681, 11);
        STEP(HH, c, d, a, b, 11, 0x6d9d6122, 16);
        STEP(HH, b, c, d, a, 14, 0xfde5380c, 23);
        STEP(HH, a, b, c, d, 1, 0xa4beea44, 4);
        STEP(HH, d, a, b, c, 4, 0x4bdecfa9, 11);
        STEP(HH, c, d, a, b, 7, 0xf6bb4b60, 16);
        STEP(HH, b, c, d, a, 10, 0xbebfbc70, 23);
        STEP(HH, a, b, c, d, 13, 0x289b7ec6, 4);
        STEP(HH, d, a, b, c, 0, 0xeaa127fa, 11);
        STEP(HH, c, d, a, b, 3, 0xd4ef3085, 16);
        STEP(HH, b, c, d, a, 6, 0x04881d05, 23);
        STEP(HH, a, b, c, d, 9, 0xd9d4d039, 4);
        STEP(HH, d, a, b, c, 12, 0xe6db99e5, 11);
        STEP(HH, c, d, a, b, 15, 0x1fa27cf8, 16);
        STEP(HH, b, c, d, a, 2, 0xc4ac5665, 23);

        STEP(II, a, b, c, d, 0, 0xf4292244, 6);
        STEP(II, d, a, b, c, 7, 0x432aff97, 10);
        STEP(II, c, d, a, b, 14, 0xab9423a7, 15);
        STEP(II, b, c, d, a, 5, 0xfc93a039, 21);
        STEP(II, a, b, c, d, 12, 0x655b59c3, 6);
        STEP(II, d, a, b, c, 3, 0x8f0ccc92, 10);
        STEP(II, c, d, a, b, 10, 0xffeff47d, 15);
        STEP(II, b, c, d, a, 1, 0x85845dd1, 21);
        STEP(II, a, b, c, d, 8, 0x6fa87e4f, 6);
        STEP(II, d, a, b, c, 15, 0xfe2ce6e0, 10);
        STEP(II, c, d, a, b, 6, 0xa3014314, 15);
        STEP(II, b, c, d, a, 13, 0x4e0811a1, 21);
        STEP(II, a, b, c, d, 4, 0xf7537e82, 6);
        STEP(II, d, a, b, c, 11, 0xbd3af235, 10);
        STEP(II, c, d, a, b, 2, 0x2ad7d2bb, 15);
        STEP(II, b, c, d, a, 9, 0xeb86d391, 21);

        a = _mm256_add_epi32(a, a0);
        b = _mm256_add_epi32(b, b0);
        c = _mm256_add_epi32(c, c0);
        d = _mm256_add_epi32(d, d0);
    }
    uint32_t out[4][LANES];
    _mm256_storeu_si256((__m256i *)out[0], a);
    _mm256_storeu_si256((__m256i *)out[1], b);
    _mm256_storeu_si256((__m256i *)out[2], c);
    _mm256_storeu_si256((__m256i *)out[3], d);
    for (int i = 0; i < LANES; i++)
        for (int j = 0; j < 4; j++)
            h[i][j] = out[j][i];
}

void sg_md5_lanes8(uint32_t *const h[LANES], const uint8_t *const p[LANES], size_t nblocks)
{
    blocks_in_lanes(h, p, nblocks);
}

/* ---- the engine: streams of concurrent threads gathered into lanes ---- */

struct job {
    uint32_t *h;
    const uint8_t *p;
    size_t left;              /* blocks */
    bool done;
    pthread_cond_t cv;        /* done, or the hashing is this thread's now */
    struct job *next;
};

static struct {
    pthread_mutex_t mu;
    struct job *head, *tail;  /* waiting for a lane */
    struct job *lane[LANES];  /* NULL: free */
    bool hashing;             /* a thread is running the lanes */
    struct sg_md5_stats stats;
} E = { .mu = PTHREAD_MUTEX_INITIALIZER };

static atomic_int g_lanes = -1;   /* -1: not decided yet */
static atomic_uint g_inside;      /* sharing threads hashing now, alone or in the engine */
static atomic_ullong g_blocks_alone;
static _Thread_local bool t_share;

bool sg_md5_lanes_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

void sg_md5_set_lanes(bool on)
{
    atomic_store(&g_lanes, on && sg_md5_lanes_available());
}

void sg_md5_share_lanes(bool on)
{
    t_share = on;
}

static bool lanes_on(void)
{
    int v = atomic_load_explicit(&g_lanes, memory_order_relaxed);
    if (v < 0) {
        v = sg_md5_lanes_available();
        atomic_store(&g_lanes, v);
    }
    return v;
}

/* Under E.mu: waiting jobs into free lanes. */
static unsigned lanes_fill(void)
{
    unsigned busy = 0;
    for (int i = 0; i < LANES; i++) {
        if (!E.lane[i] && E.head) {
            E.lane[i] = E.head;
            E.head = E.head->next;
            if (!E.head)
                E.tail = NULL;
        }
        busy += E.lane[i] != NULL;
    }
    return busy;
}

/* Under E.mu, entered by the one hashing thread; returns once `me` is
 * done, with the hashing passed on if work is left. */
static void lanes_run(struct job *me)
{
    static const uint8_t idle_block[64 * STEP_BLOCKS];
    uint32_t idle_h[LANES][4];
    while (!me->done) {
        unsigned busy = lanes_fill();
        size_t step = STEP_BLOCKS;
        for (int i = 0; i < LANES; i++)
            if (E.lane[i] && E.lane[i]->left < step)
                step = E.lane[i]->left;
        uint32_t *h[LANES];
        const uint8_t *p[LANES];
        int only = -1;
        for (int i = 0; i < LANES; i++) {
            h[i] = E.lane[i] ? E.lane[i]->h : idle_h[i];
            p[i] = E.lane[i] ? E.lane[i]->p : idle_block;
            if (E.lane[i])
                only = i;
        }
        if (busy == 1)
            atomic_fetch_add_explicit(&g_blocks_alone, step, memory_order_relaxed);
        else
            E.stats.blocks_in_lanes += step * busy;
        E.stats.steps_by_lanes[busy]++;
        pthread_mutex_unlock(&E.mu);

        if (busy == 1)
            blocks_alone(h[only], p[only], step);
        else
            blocks_in_lanes(h, p, step);

        pthread_mutex_lock(&E.mu);
        for (int i = 0; i < LANES; i++) {
            struct job *j = E.lane[i];
            if (!j)
                continue;
            j->p += step * 64;
            j->left -= step;
            if (j->left == 0) {
                j->done = true;
                E.lane[i] = NULL;
                if (j != me)
                    pthread_cond_signal(&j->cv);
            }
        }
    }
    E.hashing = false;
    /* a thread whose blocks are still in a lane or queued takes over */
    struct job *next = E.head;
    for (int i = 0; i < LANES && !next; i++)
        next = E.lane[i];
    if (next)
        pthread_cond_signal(&next->cv);
}

static void blocks_engine(uint32_t h[4], const uint8_t *p, size_t nblocks)
{
    struct job me = { .h = h, .p = p, .left = nblocks };
    pthread_cond_init(&me.cv, NULL);
    pthread_mutex_lock(&E.mu);
    if (E.tail)
        E.tail->next = &me;
    else
        E.head = &me;
    E.tail = &me;
    while (!me.done) {
        if (!E.hashing) {
            E.hashing = true;
            lanes_run(&me);
        } else {
            pthread_cond_wait(&me.cv, &E.mu);
        }
    }
    pthread_mutex_unlock(&E.mu);
    pthread_cond_destroy(&me.cv);
}

static void blocks_counted_alone(uint32_t h[4], const uint8_t *p, size_t nblocks)
{
    blocks_alone(h, p, nblocks);
    atomic_fetch_add_explicit(&g_blocks_alone, nblocks, memory_order_relaxed);
}

static void blocks(uint32_t h[4], const uint8_t *p, size_t nblocks)
{
    if (nblocks < MIN_ENGINE_BLOCKS || !t_share || !lanes_on()) {
        if (nblocks)
            blocks_counted_alone(h, p, nblocks);
        return;
    }
    atomic_fetch_add(&g_inside, 1);
    while (nblocks) {
        if (atomic_load(&g_inside) >= JOIN_AT) {
            blocks_engine(h, p, nblocks);
            break;
        }
        size_t s = nblocks < SLICE_BLOCKS ? nblocks : SLICE_BLOCKS;
        blocks_counted_alone(h, p, s);
        p += s * 64;
        nblocks -= s;
    }
    atomic_fetch_sub(&g_inside, 1);
}

void sg_md5_stats(struct sg_md5_stats *out)
{
    pthread_mutex_lock(&E.mu);
    *out = E.stats;
    pthread_mutex_unlock(&E.mu);
    out->blocks_alone = atomic_load(&g_blocks_alone);
}

/* ---- the stream ---- */

void sg_md5_init(struct sg_md5 *m)
{
    memcpy(m->h, MD5_INIT, sizeof m->h);
    m->length = 0;
    m->n_tail = 0;
}

void sg_md5_update(struct sg_md5 *m, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    m->length += n;
    if (m->n_tail) {
        size_t c = 64 - m->n_tail;
        if (c > n)
            c = n;
        memcpy(m->tail + m->n_tail, p, c);
        m->n_tail += (unsigned)c;
        p += c;
        n -= c;
        if (m->n_tail < 64)
            return;
        blocks_counted_alone(m->h, m->tail, 1);
        m->n_tail = 0;
    }
    blocks(m->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(m->tail, p, n);
    m->n_tail = (unsigned)n;
}

void sg_md5_final(struct sg_md5 *m, uint8_t out[16])
{
    uint8_t pad[128] = { 0x80 };
    size_t n_pad = m->n_tail < 56 ? 56 - m->n_tail : 120 - m->n_tail;
    uint8_t bits[8];
    sg_put_le64(bits, m->length * 8);
    uint64_t length = m->length;
    sg_md5_update(m, pad, n_pad);
    sg_md5_update(m, bits, 8);
    m->length = length;
    for (int i = 0; i < 4; i++)
        sg_put_le32(out + 4 * i, m->h[i]);
}
