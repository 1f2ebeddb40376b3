/* test_stream_memory.c -- what a stream hold costs the gateway (issue 33:
 * 10,000 stream holds under 64 MiB at the default settings; measured by
 * bench/streams.py, bench/RESULTS.md "Stream holds: memory").
 *
 * 4,000 stream holds (POST /v1/locks/NAME, Accept: text/event-stream),
 * each on its own connection, opened with plain sockets 200 at a time until
 * each has read `event: granted`; the gateway's RSS (VmRSS) then, less its RSS before,
 * per stream, must stay under STREAM_BYTES_MAX.  Before the granted stream
 * dropped its headers, its acquisition and its request (about 6,900 bytes
 * a stream) this failed; now it is about 5,500 (libmicrohttpd's part alone
 * is about 4,850: the connection's 4 KiB pool).  Then every connection is
 * closed, every hold is released, and the gateway stops cleanly.
 *
 * Skipped under the sanitizers (their allocator's padding is most of what
 * it would measure). */
#include "tests/integration/harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAMS 4000
#define BATCH   200
/* Halfway between what a stream hold takes now (5,500 to 5,550 bytes at
 * 4,000 in batches of 200, run after run) and what it took before (6,900
 * on main 88cc3e3). */
#define STREAM_BYTES_MAX 6200

static struct h_redis redis;
static struct h_gw gw;

struct client {
    int fd;        /* its socket, -1 once closed */
    int granted;   /* it read `event: granted` */
    char seen[64]; /* the end of what it read, for a needle split over reads */
};

static struct client clients[STREAMS];
static struct pollfd pfds[STREAMS];

/* The gateway's VmRSS in bytes, or -1. */
static long long rss_bytes(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static int open_stream(int i, int port) {
    int fd = h_connect(port);
    if (fd < 0) return -1;
    char req[256];
    int n = snprintf(req, sizeof req,
                     "POST /v1/locks/mem-%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Accept: text/event-stream\r\nContent-Type: application/json\r\n"
                     "Content-Length: 2\r\n\r\n{}",
                     i);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    clients[i].fd = fd;
    return 0;
}

/* Reads what came on every open connection until `want` have been
 * granted or timeout_ms passed; how many were granted. */
static int wait_granted(int want, int timeout_ms) {
    static const char needle[] = "event: granted";
    int granted = 0;
    for (int i = 0; i < STREAMS; i++) granted += clients[i].granted;
    for (long long t0 = h_now_ms(); granted < want && h_now_ms() - t0 < timeout_ms;) {
        int n = 0;
        for (int i = 0; i < STREAMS; i++)
            if (clients[i].fd >= 0 && !clients[i].granted)
                pfds[n++] = (struct pollfd){.fd = clients[i].fd, .events = POLLIN};
        if (poll(pfds, (nfds_t)n, 100) <= 0) continue;
        for (int i = 0, k = 0; i < STREAMS; i++) {
            struct client *c = &clients[i];
            if (c->fd < 0 || c->granted) continue;
            struct pollfd *p = &pfds[k++];
            if (!(p->revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[2048 + sizeof c->seen];
            size_t kept = strlen(c->seen);
            memcpy(buf, c->seen, kept);
            ssize_t r = read(c->fd, buf + kept, 2048);
            if (r <= 0) {
                close(c->fd);
                c->fd = -1;
                continue;
            }
            buf[kept + (size_t)r] = '\0';
            if (strstr(buf, needle)) {
                c->granted = 1;
                granted++;
            }
            size_t len = kept + (size_t)r, tail = len < sizeof needle ? len : sizeof needle - 1;
            memcpy(c->seen, buf + len - tail, tail);
            c->seen[tail] = '\0';
        }
    }
    return granted;
}

/* 4,000 stream holds cost under STREAM_BYTES_MAX each; closed, they are all
 * released. */
static void test_stream_hold_bytes(void) {
    long long before = rss_bytes(gw.pid);
    long long t0 = h_now_ms();
    int opened = 0, granted = 0;
    for (int i = 0; i < STREAMS; i++) clients[i].fd = -1;
    /* In batches, each granted before the next opens: what a stream keeps,
     * not how many a burst has under way at once (their acquisitions and
     * Redis calls, freed at the grant, moved this figure by 500 bytes). */
    for (int i = 0; i < STREAMS; i++) {
        opened += open_stream(i, gw.port) == 0;
        if ((i + 1) % BATCH == 0 || i + 1 == STREAMS) granted = wait_granted(opened, 30000);
    }
    CHECK_EQ_INT(opened, STREAMS);
    CHECK_EQ_INT(granted, STREAMS);
    long long after = rss_bytes(gw.pid);
    CHECK(before > 0 && after > 0);
    long long per = (after - before) / STREAMS;
    fprintf(stderr,
            "    %d stream holds granted in %lld ms: RSS %.1f -> %.1f MiB, %lld bytes a stream "
            "(at most %d)\n",
            granted, h_now_ms() - t0, before / 1048576.0, after / 1048576.0, per, STREAM_BYTES_MAX);
    CHECK(per > 0 && per < STREAM_BYTES_MAX);
    for (int i = 0; i < STREAMS; i++)
        if (clients[i].fd >= 0) close(clients[i].fd);
    const char *left = NULL;
    for (t0 = h_now_ms(); h_now_ms() - t0 < 10000; h_sleep_ms(20)) {
        /* held: a lock hash whose holders field is not empty (its last
         * fence keeps the hash 10 s after use), as bench/streams.py counts */
        left = h_redis_cli(&redis, "EVAL \"local n = 0 for _, k in ipairs(redis.call('keys', "
                                   "'lockgate:lock:*')) do local x = redis.call('hget', k, 'x') "
                                   "if x and #struct.unpack('<s', x) > 0 then n = n + 1 end end "
                                   "return n\" 0");
        if (left && strcmp(left, "0") == 0) break;
    }
    if (!left || strcmp(left, "0") != 0) fprintf(stderr, "    still held: %s\n", left ? left : "?");
    CHECK(left && strcmp(left, "0") == 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
#if defined(__SANITIZE_ADDRESS__)
    printf("ok - test_stream_hold_bytes # skip: not under the sanitizers\n");
    return check_summary("stream_memory");
#endif
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < STREAMS + 64) {
        printf("ok - test_stream_hold_bytes # skip: fewer than %d descriptors\n", STREAMS + 64);
        return check_summary("stream_memory");
    }
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&gw, &redis, "--workers 2") < 0) return 2;
    RUN_SOME(test_stream_hold_bytes);
    CHECK_EQ_INT(h_gw_stop(&gw, 10000), 0);
    h_redis_stop(&redis);
    return check_summary("stream_memory");
}
