/* bench/dio_prealloc.c - does preallocating a fill's cache file change what
 * its O_DIRECT writes cost? A fill writes a new file (O_TRUNC) with
 * O_DIRECT through io_uring: a 4 KiB header block, then the body in 1 MiB
 * writes, four in flight, then fdatasync. On ext4 a write that extends the
 * file cannot be done without blocking, so io_uring hands it to one of its
 * worker threads (iou-wrk); a profile of eight 1 MiB fills at once put 20%
 * of the gateway's samples in them. This writes N such files three ways:
 *
 *   0  as the fill does (the writes extend the file)
 *   1  fallocate(fd, 0, 0, size) first (the writes land inside the file)
 *   2  fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) first
 *
 * and prints the wall time, the process's CPU per file (its io_uring
 * workers included) and the threads it had. Run it with the machine's busy
 * time around it to see CPU that moved out of the process:
 *
 *   cmake --build build-bench --target dio_prealloc
 *   busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
 *   b0=$(busy); build-bench/bench/dio_prealloc 0 DIR 20 67108864; b1=$(busy)
 *   echo $(( (b1 - b0) * 10 )) ms   # busy time of the whole machine, in 1/100 s
 *
 * DIR must be on the file system under test (not tmpfs). Results:
 * bench/results/fill-prealloc.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { PIECE = 1 << 20, DEPTH = 4, HDR = 4096 };

static int threads_now(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int wait_one(struct io_uring *ring)
{
    struct io_uring_cqe *c;
    if (io_uring_wait_cqe(ring, &c) != 0)
        return -1;
    int res = c->res;
    io_uring_cqe_seen(ring, c);
    if (res < 0)
        fprintf(stderr, "write: %s\n", strerror(-res));
    return res < 0 ? -1 : 0;
}

static void submit_write(struct io_uring *ring, int fd, const void *p, size_t len, off_t off)
{
    struct io_uring_sqe *s = io_uring_get_sqe(ring);
    io_uring_prep_write(s, fd, p, (unsigned)len, (unsigned long long)off);
    io_uring_submit(ring);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODE(0|1|2) DIR FILES SIZE\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]), nfiles = atoi(argv[3]);
    const char *dir = argv[2];
    size_t size = (size_t)atoll(argv[4]);   /* a multiple of 4096 */
    struct io_uring ring;
    void *buf;
    if (io_uring_queue_init(8, &ring, 0) != 0 || posix_memalign(&buf, 4096, size + HDR) != 0)
        return 1;
    memset(buf, 7, size + HDR);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int max_threads = 0;
    for (int i = 0; i < nfiles; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/dio-prealloc-%d", dir, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
        if (fd < 0) {
            perror(p);
            return 1;
        }
        if (mode == 1)
            (void)fallocate(fd, 0, 0, (off_t)(size + HDR));
        if (mode == 2)
            (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(size + HDR));
        submit_write(&ring, fd, buf, HDR, 0);
        if (wait_one(&ring) != 0)
            return 1;
        size_t off = 0;
        int inflight = 0;
        while (off < size || inflight) {
            while (off < size && inflight < DEPTH) {
                size_t len = size - off < PIECE ? size - off : PIECE;
                submit_write(&ring, fd, (char *)buf + off, len, (off_t)(HDR + off));
                off += len;
                inflight++;
            }
            if (wait_one(&ring) != 0)
                return 1;
            inflight--;
        }
        fdatasync(fd);
        close(fd);
        unlink(p);
        int t = threads_now();
        if (t > max_threads)
            max_threads = t;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    printf("mode %d: %.1f ms wall, %.3f ms CPU per file, at most %d threads\n", mode,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
           cpu_ms / nfiles, max_threads);
    io_uring_queue_exit(&ring);
    free(buf);
    return 0;
}
