/* tests/unit/test_cache_index.c - the cache index (cache/cache_index.h): lookups,
 * single-flight fills, persistence across clean restarts and kill -9, torn and
 * corrupt journals, invalidation, eviction policies, compaction, concurrency, and
 * the restart time and memory per entry at 1M entries. Fresh directory per test. */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache_index.h"
#include "log.h"

int register_tests(void);

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static char dir[256];

static void dir_new(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_cidx.XXXXXX", t && *t ? t : "/tmp");
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static void dir_rm(void)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const struct cidx_opts no_sweep = {.sweep = CIDX_SWEEP_NONE};
static const struct cidx_opts sync_sweep = {.sweep = CIDX_SWEEP_SYNC};

static struct cidx *open_x(const struct cidx_opts *o, uint64_t cap)
{
    struct cidx *x = NULL;
    CU_ASSERT_FATAL(cidx_open_ex(dir, cap, o, &x) == CIDX_OK);
    return x;
}

static void keyname(char *buf, size_t len, unsigned i)
{
    snprintf(buf, len, "train/shard-%06u.tar", i);
}

static void etag_of(char *buf, unsigned i)
{
    snprintf(buf, 33, "%08x%08x%08x%08x", i, i * 7u, i * 13u, ~i);
}

static struct timespec mtime_of(unsigned i)
{
    return (struct timespec){.tv_sec = 1700000000 + (time_t)i, .tv_nsec = (long)i * 1000};
}

static uint64_t size_of(unsigned i)
{
    return 1000 + i;
}

/* Creates the data file with exactly `size` bytes (sparse). */
static void make_file(struct cidx *x, uint64_t id, uint64_t size)
{
    char p[512];
    CU_ASSERT_FATAL(cidx_data_path(x, id, p, sizeof p) == 0);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(ftruncate(fd, (off_t)size) == 0);
    close(fd);
}

static bool file_exists(struct cidx *x, uint64_t id)
{
    char p[512];
    cidx_data_path(x, id, p, sizeof p);
    return access(p, F_OK) == 0;
}

/* begin_fill + fill_size (+ file) + publish of entry i; returns the id. */
static uint64_t put(struct cidx *x, unsigned i, bool with_file)
{
    char k[64], e[40];
    keyname(k, sizeof k, i);
    etag_of(e, i);
    uint64_t id = 0;
    CU_ASSERT_FATAL(cidx_begin_fill(x, "bkt", k, &id, NULL) == CIDX_OK);
    CU_ASSERT(cidx_fill_size(x, id, size_of(i)) == CIDX_OK);
    if (with_file)
        make_file(x, id, size_of(i));
    CU_ASSERT_FATAL(cidx_publish(x, id, size_of(i), e, mtime_of(i)) == CIDX_OK);
    return id;
}

static enum cidx_status get(struct cidx *x, unsigned i, struct cidx_info *inf)
{
    char k[64];
    keyname(k, sizeof k, i);
    return cidx_lookup(x, "bkt", k, inf);
}

/* Entry i is present with exactly the info put() gave it. */
static bool has_exact(struct cidx *x, unsigned i)
{
    struct cidx_info inf;
    char e[40];
    etag_of(e, i);
    if (get(x, i, &inf) != CIDX_OK)
        return false;
    return inf.state == CIDX_STATE_READY && inf.size == size_of(i) && strcmp(inf.etag, e) == 0 &&
           inf.mtime.tv_sec == mtime_of(i).tv_sec && inf.mtime.tv_nsec == mtime_of(i).tv_nsec;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void lookup_miss_then_hit_after_publish(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    struct cidx_info inf;
    CU_ASSERT(get(x, 1, &inf) == CIDX_MISS);
    uint64_t id = put(x, 1, false);
    CU_ASSERT(get(x, 1, &inf) == CIDX_OK);
    CU_ASSERT(inf.id == id);
    CU_ASSERT(has_exact(x, 1));
    CU_ASSERT(cidx_lookup(x, "other", "train/shard-000001.tar", &inf) == CIDX_MISS);
    uint64_t used, res, objs;
    cidx_usage(x, &used, &res, &objs);
    CU_ASSERT(used == size_of(1) && res == 0 && objs == 1);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    dir_rm();
}

static void begin_fill_is_single_flight(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    uint64_t id1, id2;
    enum cidx_state st;
    CU_ASSERT(cidx_begin_fill(x, "b", "k", &id1, &st) == CIDX_OK);
    CU_ASSERT(st == CIDX_STATE_FILLING);
    CU_ASSERT(cidx_begin_fill(x, "b", "k", &id2, &st) == CIDX_EXISTS);
    CU_ASSERT(id2 == id1 && st == CIDX_STATE_FILLING);
    struct cidx_info inf;
    CU_ASSERT(cidx_lookup(x, "b", "k", &inf) == CIDX_FILLING);
    CU_ASSERT(inf.id == id1);
    CU_ASSERT(cidx_fill_size(x, id1, 500) == CIDX_OK);
    uint64_t used, res;
    cidx_usage(x, &used, &res, NULL);
    CU_ASSERT(used == 0 && res == 500);
    CU_ASSERT(cidx_publish(x, id1, 500, "d41d8cd98f00b204e9800998ecf8427e", mtime_of(0)) ==
              CIDX_OK);
    CU_ASSERT(cidx_publish(x, id1, 500, "d41d8cd98f00b204e9800998ecf8427e", mtime_of(0)) ==
              CIDX_INVAL);
    CU_ASSERT(cidx_begin_fill(x, "b", "k", &id2, &st) == CIDX_EXISTS);
    CU_ASSERT(id2 == id1 && st == CIDX_STATE_READY);
    cidx_usage(x, &used, &res, NULL);
    CU_ASSERT(used == 500 && res == 0);
    /* fill_abort drops the entry and its file */
    uint64_t id3;
    CU_ASSERT(cidx_begin_fill(x, "b", "k2", &id3, NULL) == CIDX_OK);
    make_file(x, id3, 10);
    CU_ASSERT(cidx_fill_abort(x, id3) == CIDX_OK);
    CU_ASSERT(!file_exists(x, id3));
    CU_ASSERT(cidx_lookup(x, "b", "k2", NULL) == CIDX_MISS);
    CU_ASSERT(cidx_fill_size(x, id3, 1) == CIDX_NOT_FOUND);
    CU_ASSERT(cidx_begin_fill(x, "b", "k3", &id3, NULL) == CIDX_OK);
    CU_ASSERT(cidx_fill_size(x, id3, (1u << 30) + 1u) == CIDX_TOOBIG);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    dir_rm();
}

static void publish_survives_clean_restart_with_same_info(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    uint64_t ids[50];
    for (unsigned i = 0; i < 50; i++)
        ids[i] = put(x, i, false);
    /* etags that are not a plain MD5 keep their text */
    const char *odd[] = {"d41d8cd98f00b204e9800998ecf8427e-17", "not-an-md5", "ABCDEF"};
    uint64_t oid[3];
    for (unsigned i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "odd%u", i);
        CU_ASSERT(cidx_begin_fill(x, "b", k, &oid[i], NULL) == CIDX_OK);
        CU_ASSERT(cidx_publish(x, oid[i], 7, odd[i], mtime_of(i)) == CIDX_OK);
    }
    CU_ASSERT(cidx_touch_validated(x, ids[3], 1234567) == CIDX_OK);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    x = open_x(&no_sweep, 1 << 30);
    for (unsigned i = 0; i < 50; i++) {
        CU_ASSERT(has_exact(x, i));
        struct cidx_info inf;
        get(x, i, &inf);
        CU_ASSERT(inf.id == ids[i]);
        if (i == 3)
            CU_ASSERT(inf.validated_at == 1234567);
    }
    for (unsigned i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "odd%u", i);
        struct cidx_info inf;
        CU_ASSERT(cidx_lookup(x, "b", k, &inf) == CIDX_OK);
        CU_ASSERT(strcmp(inf.etag, odd[i]) == 0);
        CU_ASSERT(inf.id == oid[i]);
    }
    /* ids of a new run never repeat an old one */
    uint64_t nid;
    CU_ASSERT(cidx_begin_fill(x, "bkt", "new", &nid, NULL) == CIDX_OK);
    for (unsigned i = 0; i < 50; i++)
        CU_ASSERT(nid != ids[i]);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    dir_rm();
}

/* The child publishes n entries (with files), starts one more fill with a partial
 * file and kills itself with SIGKILL: no close, no snapshot. */
static void crash_keeps_every_completed_publish_and_no_partial(void)
{
    dir_new();
    enum { N = 3000 };
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        struct cidx *x = NULL;
        if (cidx_open_ex(dir, 1ull << 40, &no_sweep, &x) != CIDX_OK)
            _exit(3);
        for (unsigned i = 0; i < N; i++)
            put(x, i, true);
        uint64_t id;
        char k[64];
        keyname(k, sizeof k, N);
        cidx_begin_fill(x, "bkt", k, &id, NULL);
        make_file(x, id, 4096); /* partial: never published */
        raise(SIGKILL);
        _exit(4);
    }
    int ws;
    waitpid(pid, &ws, 0);
    CU_ASSERT_FATAL(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    struct cidx *x = open_x(&sync_sweep, 1ull << 40);
    struct cidx_sweep_stats ss;
    cidx_sweep_wait(x, &ss);
    unsigned ok = 0;
    for (unsigned i = 0; i < N; i++)
        ok += has_exact(x, i);
    CU_ASSERT(ok == N);
    CU_ASSERT(get(x, N, NULL) == CIDX_MISS);
    uint64_t objs;
    cidx_usage(x, NULL, NULL, &objs);
    CU_ASSERT(objs == N);
    CU_ASSERT(ss.strays_removed == 1);
    CU_ASSERT(ss.files_seen == N + 1);
    CU_ASSERT(ss.missing_dropped == 0 && ss.badsize_dropped == 0);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    dir_rm();
}

/* Runs put(0..n-1) in a child that exits without close: the journal is all. */
static void child_puts(unsigned n)
{
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        struct cidx *x = NULL;
        if (cidx_open_ex(dir, 1ull << 40, &no_sweep, &x) != CIDX_OK)
            _exit(3);
        for (unsigned i = 0; i < n; i++)
            put(x, i, false);
        _exit(0);
    }
    int ws;
    waitpid(pid, &ws, 0);
    CU_ASSERT_FATAL(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* The one journal file's name and contents. */
static unsigned char *journal_read(char *name, size_t nlen, size_t *len)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep '^journal\\.'", dir);
    FILE *p = popen(cmd, "r");
    char base[64] = "";
    CU_ASSERT_FATAL(p != NULL && fgets(base, sizeof base, p) != NULL);
    pclose(p);
    base[strcspn(base, "\n")] = '\0';
    snprintf(name, nlen, "%s/%s", dir, base);
    FILE *f = fopen(name, "rb");
    CU_ASSERT_FATAL(f != NULL);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len);
    CU_ASSERT_FATAL(fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

/* Offsets of the records: header 32, then u32 len + u32 crc + payload. */
static size_t record_offsets(const unsigned char *b, size_t len, size_t *offs, size_t max)
{
    size_t n = 0, off = 32;
    while (off + 8 <= len && n < max) {
        uint32_t l = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 | (uint32_t)b[off + 2] << 16 |
                     (uint32_t)b[off + 3] << 24;
        offs[n++] = off;
        off += 8 + l;
    }
    return n;
}

/* Puts back exactly the journal `b[0..len)` as the only index file. */
static void journal_restore(const char *name, const unsigned char *b, size_t len)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/index.snap %s/journal.*", dir, dir);
    CU_ASSERT(system(cmd) == 0);
    FILE *f = fopen(name, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(b, 1, len, f) == len);
    fclose(f);
}

static void torn_journal_tail_at_every_offset_loads_records_before_it(void)
{
    enum log_level old_lvl = log_get_level();
    log_set_level(LOG_LVL_ERROR); /* one expected WARN per case */
    dir_new();
    child_puts(3);
    char name[512];
    size_t len;
    unsigned char *b = journal_read(name, sizeof name, &len);
    size_t offs[8];
    size_t n = record_offsets(b, len, offs, 8);
    CU_ASSERT_FATAL(n == 4); /* EPOCH + 3 PUBLISH */
    size_t last = offs[3];
    unsigned bad = 0;
    for (size_t cut = last; cut < len; cut++) {
        journal_restore(name, b, cut);
        struct cidx *x = open_x(&no_sweep, 1ull << 40);
        if (!has_exact(x, 0) || !has_exact(x, 1) || get(x, 2, NULL) != CIDX_MISS)
            bad++;
        /* the torn tail was cut off: appends after it are readable */
        struct stat sb;
        stat(name, &sb);
        if ((size_t)sb.st_size < last)
            bad++;
        cidx_close(x);
    }
    CU_ASSERT(bad == 0);
    log_set_level(old_lvl);
    /* the whole file loads all three */
    journal_restore(name, b, len);
    struct cidx *x = open_x(&no_sweep, 1ull << 40);
    CU_ASSERT(has_exact(x, 0) && has_exact(x, 1) && has_exact(x, 2));
    cidx_close(x);
    free(b);
    dir_rm();
}

static void corrupt_record_stops_replay_there(void)
{
    enum log_level old_lvl = log_get_level();
    log_set_level(LOG_LVL_ERROR); /* one expected WARN per case */
    dir_new();
    child_puts(3);
    char name[512];
    size_t len;
    unsigned char *b = journal_read(name, sizeof name, &len);
    size_t offs[8];
    CU_ASSERT_FATAL(record_offsets(b, len, offs, 8) == 4);
    /* every byte of the second PUBLISH, one at a time */
    unsigned bad = 0;
    for (size_t o = offs[2]; o < offs[3]; o++) {
        b[o] ^= 0x40;
        journal_restore(name, b, len);
        b[o] ^= 0x40;
        struct cidx *x = open_x(&no_sweep, 1ull << 40);
        if (!has_exact(x, 0) || get(x, 1, NULL) != CIDX_MISS || get(x, 2, NULL) != CIDX_MISS)
            bad++;
        cidx_close(x);
    }
    CU_ASSERT(bad == 0);
    log_set_level(old_lvl);
    free(b);
    dir_rm();
}

static void invalidate_during_fill_refuses_publish(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    uint64_t id, id2;
    CU_ASSERT(cidx_begin_fill(x, "b", "k", &id, NULL) == CIDX_OK);
    CU_ASSERT(cidx_fill_size(x, id, 100) == CIDX_OK);
    make_file(x, id, 100);
    CU_ASSERT(cidx_invalidate(x, "b", "k") == CIDX_OK);
    CU_ASSERT(!file_exists(x, id));
    CU_ASSERT(cidx_lookup(x, "b", "k", NULL) == CIDX_MISS);
    /* a new fill of the fresh object starts at once, with another id */
    CU_ASSERT(cidx_begin_fill(x, "b", "k", &id2, NULL) == CIDX_OK);
    CU_ASSERT(id2 != id);
    CU_ASSERT(cidx_publish(x, id, 100, "x", mtime_of(0)) == CIDX_STALE);
    CU_ASSERT(cidx_publish(x, id, 100, "x", mtime_of(0)) == CIDX_NOT_FOUND);
    uint64_t used, res;
    cidx_usage(x, &used, &res, NULL);
    CU_ASSERT(used == 0 && res == 0);
    CU_ASSERT(cidx_publish(x, id2, 5, "y", mtime_of(0)) == CIDX_OK);
    /* invalidate of a READY entry: journaled, gone after restart, file unlinked */
    make_file(x, id2, 5);
    CU_ASSERT(cidx_invalidate(x, "b", "k") == CIDX_OK);
    CU_ASSERT(!file_exists(x, id2));
    CU_ASSERT(cidx_invalidate(x, "b", "k") == CIDX_MISS);
    cidx_close(x);
    x = open_x(&no_sweep, 1 << 30);
    CU_ASSERT(cidx_lookup(x, "b", "k", NULL) == CIDX_MISS);
    cidx_close(x);
    dir_rm();
}

static void eviction_keeps_used_under_target_never_pinned_or_filling(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    uint64_t ids[100];
    for (unsigned i = 0; i < 100; i++)
        ids[i] = put(x, i, true);
    for (unsigned i = 0; i < 10; i++)
        CU_ASSERT(cidx_pin(x, ids[i * 10]) == CIDX_OK);
    struct cidx_info inf;
    CU_ASSERT(cidx_lookup_pin(x, "bkt", "train/shard-000005.tar", &inf) == CIDX_OK);
    uint64_t fid[5];
    for (unsigned i = 0; i < 5; i++) {
        char k[16];
        snprintf(k, sizeof k, "f%u", i);
        cidx_begin_fill(x, "bkt", k, &fid[i], NULL);
        cidx_fill_size(x, fid[i], 1000);
    }
    uint64_t used, res, freed;
    unsigned cnt;
    CU_ASSERT(cidx_evict(x, 60000, &freed, &cnt) == CIDX_OK);
    cidx_usage(x, &used, &res, NULL);
    CU_ASSERT(used + res <= 60000);
    CU_ASSERT(res == 5000);
    CU_ASSERT(cnt > 0 && freed > 0);
    unsigned gone_files = 0, gone = 0;
    for (unsigned i = 0; i < 100; i++) {
        if (get(x, i, NULL) == CIDX_MISS) {
            gone++;
            gone_files += !file_exists(x, ids[i]);
        }
    }
    CU_ASSERT(gone == cnt && gone_files == cnt);
    /* down to nothing: only pinned and filling stay, and it says BUSY */
    CU_ASSERT(cidx_evict(x, 0, NULL, NULL) == CIDX_BUSY);
    for (unsigned i = 0; i < 10; i++)
        CU_ASSERT(get(x, i * 10, NULL) == CIDX_OK);
    CU_ASSERT(get(x, 5, NULL) == CIDX_OK);
    uint64_t objs;
    cidx_usage(x, NULL, NULL, &objs);
    CU_ASSERT(objs == 11);
    for (unsigned i = 0; i < 5; i++) {
        char k[16];
        snprintf(k, sizeof k, "f%u", i);
        CU_ASSERT(cidx_lookup(x, "bkt", k, NULL) == CIDX_FILLING);
    }
    /* unpinned, they become evictable */
    CU_ASSERT(cidx_unpin(x, inf.id) == CIDX_OK);
    CU_ASSERT(cidx_unpin(x, inf.id) == CIDX_INVAL);
    CU_ASSERT(cidx_evict(x, 0, NULL, &cnt) == CIDX_BUSY);
    CU_ASSERT(cnt == 1);
    cidx_close(x);
    dir_rm();
}

static void lru_evicts_untouched_entries_first(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    enum { N = 400 };
    for (unsigned i = 0; i < N; i++)
        put(x, i, false);
    for (unsigned i = 0; i < N; i += 2)
        CU_ASSERT(get(x, i, NULL) == CIDX_OK);
    uint64_t used;
    cidx_usage(x, &used, NULL, NULL);
    /* the odd ones hold sum(1000+i, i odd) bytes: evict exactly that much */
    uint64_t odd = 0;
    for (unsigned i = 1; i < N; i += 2)
        odd += size_of(i);
    unsigned cnt;
    CU_ASSERT(cidx_evict(x, used - odd, NULL, &cnt) == CIDX_OK);
    CU_ASSERT(cnt == N / 2);
    unsigned wrong = 0;
    for (unsigned i = 0; i < N; i++)
        wrong += (get(x, i, NULL) == CIDX_OK) != (i % 2 == 0);
    CU_ASSERT(wrong == 0);
    /* and the order survives a restart: the oldest of the rest goes next */
    cidx_close(x);
    x = open_x(&no_sweep, 1 << 30);
    for (unsigned i = 200; i < N; i += 2)
        get(x, i, NULL);
    cidx_usage(x, &used, NULL, NULL);
    uint64_t low = 0;
    for (unsigned i = 0; i < 200; i += 2)
        low += size_of(i);
    CU_ASSERT(cidx_evict(x, used - low, NULL, &cnt) == CIDX_OK);
    wrong = 0;
    for (unsigned i = 0; i < N; i += 2)
        wrong += (get(x, i, NULL) == CIDX_OK) != (i >= 200);
    CU_ASSERT(wrong == 0);
    cidx_close(x);
    dir_rm();
}

static void next_use_policy_evicts_unhinted_then_furthest(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    enum { N = 200 };
    uint64_t ids[N];
    for (unsigned i = 0; i < N; i++)
        ids[i] = put(x, i, false);
    /* hinted: the even ones, next use = a permutation of 0..99 */
    for (unsigned i = 0; i < N; i += 2)
        CU_ASSERT(cidx_set_next_use(x, ids[i], (uint64_t)((i / 2) * 37 % 100)) == CIDX_OK);
    /* make the unhinted the most recently used: LRU alone would keep them */
    for (unsigned i = 1; i < N; i += 2)
        get(x, i, NULL);
    cidx_set_policy(x, CIDX_POLICY_NEXT_USE);
    /* the unhinted are the ones nobody needs: counted up to the limit asked */
    CU_ASSERT_EQUAL(cidx_unneeded(x, 7), 7);
    CU_ASSERT_EQUAL(cidx_unneeded(x, 1000), N / 2);
    uint64_t used, odd = 0;
    for (unsigned i = 1; i < N; i += 2)
        odd += size_of(i);
    cidx_usage(x, &used, NULL, NULL);
    unsigned cnt;
    CU_ASSERT(cidx_evict(x, used - odd, NULL, &cnt) == CIDX_OK);
    CU_ASSERT(cnt == N / 2);
    CU_ASSERT_EQUAL(cidx_unneeded(x, 1000), 0);
    unsigned wrong = 0;
    for (unsigned i = 0; i < N; i++)
        wrong += (get(x, i, NULL) == CIDX_OK) != (i % 2 == 0);
    CU_ASSERT(wrong == 0);
    /* then the furthest next use: evict 10 -> next uses 90..99 are gone */
    for (unsigned r = 0; r < 10; r++) {
        cidx_usage(x, &used, NULL, NULL);
        CU_ASSERT(cidx_evict(x, used - 1, NULL, &cnt) == CIDX_OK && cnt == 1);
    }
    wrong = 0;
    for (unsigned i = 0; i < N; i += 2) {
        unsigned nu = (i / 2) * 37 % 100;
        wrong += (get(x, i, NULL) == CIDX_OK) != (nu < 90);
    }
    CU_ASSERT(wrong == 0);
    /* a hinted entry set back to "no next use" goes before any hinted one */
    CU_ASSERT(cidx_set_next_use(x, ids[0], CIDX_NEXT_USE_NONE) == CIDX_OK);
    cidx_usage(x, &used, NULL, NULL);
    CU_ASSERT(cidx_evict(x, used - 1, NULL, &cnt) == CIDX_OK && cnt == 1);
    CU_ASSERT(get(x, 0, NULL) == CIDX_MISS);
    cidx_close(x);
    dir_rm();
}

static size_t files_named(const char *prefix)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^%s'", dir, prefix);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p != NULL) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return (size_t)n;
}

static void compaction_round_trip_keeps_exact_set(void)
{
    dir_new();
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        struct cidx *x = NULL;
        if (cidx_open_ex(dir, 1ull << 40, &no_sweep, &x) != CIDX_OK)
            _exit(3);
        for (unsigned i = 0; i < 1000; i++)
            put(x, i, false);
        for (unsigned i = 0; i < 1000; i += 3) {
            char k[64];
            keyname(k, sizeof k, i);
            cidx_invalidate(x, "bkt", k);
        }
        if (cidx_compact(x) != CIDX_OK)
            _exit(5);
        for (unsigned i = 1000; i < 1010; i++)
            put(x, i, false);
        char k[64];
        keyname(k, sizeof k, 1);
        cidx_invalidate(x, "bkt", k);
        _exit(0); /* snapshot + journal tail, no close */
    }
    int ws;
    waitpid(pid, &ws, 0);
    CU_ASSERT_FATAL(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CU_ASSERT(files_named("journal") == 1);
    CU_ASSERT(files_named("index.snap") == 1);
    for (int round = 0; round < 2; round++) {
        struct cidx *x = open_x(&no_sweep, 1ull << 40);
        unsigned wrong = 0;
        for (unsigned i = 0; i < 1010; i++) {
            bool want = i >= 1000 || (i % 3 != 0 && i != 1);
            wrong += has_exact(x, i) != want;
        }
        CU_ASSERT(wrong == 0);
        cidx_close(x); /* round 2 loads the snapshot close wrote */
    }
    CU_ASSERT(files_named("journal") == 1);
    dir_rm();
}

struct conc {
    struct cidx *x;
    atomic_bool stop;
    atomic_ulong hits, bad;
    unsigned n;
};

static void *reader(void *arg)
{
    struct conc *c = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    while (!atomic_load(&c->stop)) {
        unsigned i = (unsigned)rand_r(&seed) % c->n;
        struct cidx_info inf;
        enum cidx_status st = get(c->x, i, &inf);
        if (st == CIDX_OK) {
            atomic_fetch_add(&c->hits, 1);
            char e[40];
            etag_of(e, i);
            if (inf.size != size_of(i) || strcmp(inf.etag, e) != 0)
                atomic_fetch_add(&c->bad, 1);
            if (i % 5 == 0 && cidx_pin(c->x, inf.id) == CIDX_OK)
                cidx_unpin(c->x, inf.id);
        }
    }
    return NULL;
}

static void concurrent_lookups_while_publishing_and_evicting(void)
{
    dir_new();
    struct conc c = {.n = SANITIZED ? 20000 : 60000};
    c.x = open_x(&no_sweep, 1ull << 40);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, reader, &c);
    for (unsigned i = 0; i < c.n; i++) {
        put(c.x, i, false);
        if (i % 1000 == 999) {
            uint64_t used;
            cidx_usage(c.x, &used, NULL, NULL);
            CU_ASSERT(cidx_evict(c.x, used / 2, NULL, NULL) == CIDX_OK);
        }
        if (i % 7 == 0) {
            char k[64];
            keyname(k, sizeof k, i / 2);
            cidx_invalidate(c.x, "bkt", k);
        }
    }
    atomic_store(&c.stop, true);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT(atomic_load(&c.bad) == 0);
    CU_ASSERT(atomic_load(&c.hits) > 0);
    printf("\n    concurrency: %lu hits by 4 readers during %u publishes\n",
           atomic_load(&c.hits), c.n);
    CU_ASSERT(cidx_close(c.x) == CIDX_OK);
    dir_rm();
}

static void sweep_removes_strays_and_drops_missing_or_resized(void)
{
    dir_new();
    struct cidx *x = open_x(&no_sweep, 1 << 30);
    uint64_t ids[6];
    for (unsigned i = 0; i < 6; i++)
        ids[i] = put(x, i, true);
    make_file(x, ids[5] + 64, 10); /* a stray of this run: an id never published */
    cidx_close(x);
    x = open_x(&no_sweep, 1 << 30);
    /* file gone, file of another size, file with a 4 KiB header block (fine) */
    char path[512];
    cidx_data_path(x, ids[0], path, sizeof path);
    unlink(path);
    make_file(x, ids[1], size_of(1) + 1);
    make_file(x, ids[2], size_of(2) + 4096);
    cidx_close(x);
    x = open_x(NULL, 1 << 30); /* default: background sweep */
    struct cidx_sweep_stats ss;
    cidx_sweep_wait(x, &ss);
    CU_ASSERT(ss.strays_removed == 1);
    CU_ASSERT(ss.missing_dropped == 1);
    CU_ASSERT(ss.badsize_dropped == 1);
    CU_ASSERT(get(x, 0, NULL) == CIDX_MISS);
    CU_ASSERT(get(x, 1, NULL) == CIDX_MISS);
    CU_ASSERT(!file_exists(x, ids[1]));
    for (unsigned i = 2; i < 6; i++)
        CU_ASSERT(has_exact(x, i));
    cidx_close(x);
    /* and the drops were journaled */
    x = open_x(&no_sweep, 1 << 30);
    CU_ASSERT(get(x, 1, NULL) == CIDX_MISS);
    uint64_t objs;
    cidx_usage(x, NULL, NULL, &objs);
    CU_ASSERT(objs == 4);
    cidx_close(x);
    dir_rm();
}

static void million_entries_restart_time_and_memory(void)
{
    dir_new();
    const char *env = getenv("CIDX_TEST_N");
    unsigned n = env ? (unsigned)strtoul(env, NULL, 10) : SANITIZED ? 200000u : 1000000u;
    struct cidx *x = open_x(&no_sweep, 1ull << 50);
    double t0 = now_ms();
    for (unsigned i = 0; i < n; i++)
        put(x, i, false);
    double t_ins = now_ms() - t0;
    struct cidx_mem_stats ms;
    cidx_mem(x, &ms);
    double per = (double)(ms.entry_bytes + ms.table_bytes - ms.key_bytes) / (double)ms.entries;
    t0 = now_ms();
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    double t_close = now_ms() - t0;
    t0 = now_ms();
    x = open_x(&no_sweep, 1ull << 50);
    CU_ASSERT(has_exact(x, n / 2));
    double t_open = now_ms() - t0;
    uint64_t objs;
    cidx_usage(x, NULL, NULL, &objs);
    CU_ASSERT(objs == n);
    CU_ASSERT(per <= 150.0);
    /* eviction of 10 %: cost per victim (files absent: the unlink is ENOENT) */
    uint64_t used;
    cidx_usage(x, &used, NULL, NULL);
    unsigned cnt;
    t0 = now_ms();
    CU_ASSERT(cidx_evict(x, used - used / 10, NULL, &cnt) == CIDX_OK);
    double t_ev = now_ms() - t0;
    printf("\n    insert+publish %u: %.0f ms; close (snapshot): %.0f ms\n"
           "    restart with %u entries: %.0f ms, %.1f bytes/entry "
           "(+ %.1f key bytes; entries %" PRIu64 " B, tables %" PRIu64 " B)\n"
           "    evict %u (10%%): %.0f ms, %.2f us/entry\n",
           n, t_ins, t_close, n, t_open, per, (double)ms.key_bytes / (double)ms.entries,
           ms.entry_bytes, ms.table_bytes, cnt, t_ev, t_ev * 1000.0 / cnt);
    CU_ASSERT(cidx_close(x) == CIDX_OK);
    dir_rm();
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("cache_index", NULL, NULL);
    if (s == NULL)
        return -1;
    struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"lookup_miss_then_hit_after_publish", lookup_miss_then_hit_after_publish},
        {"begin_fill_is_single_flight", begin_fill_is_single_flight},
        {"publish_survives_clean_restart_with_same_info",
         publish_survives_clean_restart_with_same_info},
        {"crash_keeps_every_completed_publish_and_no_partial",
         crash_keeps_every_completed_publish_and_no_partial},
        {"torn_journal_tail_at_every_offset_loads_records_before_it",
         torn_journal_tail_at_every_offset_loads_records_before_it},
        {"corrupt_record_stops_replay_there", corrupt_record_stops_replay_there},
        {"invalidate_during_fill_refuses_publish", invalidate_during_fill_refuses_publish},
        {"eviction_keeps_used_under_target_never_pinned_or_filling",
         eviction_keeps_used_under_target_never_pinned_or_filling},
        {"lru_evicts_untouched_entries_first", lru_evicts_untouched_entries_first},
        {"next_use_policy_evicts_unhinted_then_furthest",
         next_use_policy_evicts_unhinted_then_furthest},
        {"compaction_round_trip_keeps_exact_set", compaction_round_trip_keeps_exact_set},
        {"concurrent_lookups_while_publishing_and_evicting",
         concurrent_lookups_while_publishing_and_evicting},
        {"sweep_removes_strays_and_drops_missing_or_resized",
         sweep_removes_strays_and_drops_missing_or_resized},
        {"million_entries_restart_time_and_memory", million_entries_restart_time_and_memory},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (CU_add_test(s, t[i].name, t[i].fn) == NULL)
            return -1;
    return 0;
}
