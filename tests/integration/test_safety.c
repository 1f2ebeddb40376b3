/* test_safety.c -- issue 28: what the gateway does when things are unclear.
 *
 *   - configuration that cannot work is refused at start: exit 2 and one
 *     line (key prefixes with braces);
 *   - signals are safe from the first instruction: a SIGHUP while the
 *     gateway is still starting (held in auth_load by a FIFO as its auth
 *     file) rereads, a SIGTERM stops it cleanly;
 *   - a Redis stall during an acquire (the client gets 503, the script
 *     runs when Redis resumes): the grant is undone, the name is free
 *     within UNDO_BOUND_MS of Redis answering again; a lock, a shared
 *     lock, a semaphore permit, a multi-lock and a session-bound hold;
 *     in Sentinel mode too (a multi-lock and a session-bound hold);
 *   - a Redis stall while a waiter's attempt is in Redis's socket: the
 *     attempt runs when Redis resumes, and the waiter's next attempt finds
 *     its own grant: 201 with count 1, never a re-entry;
 *   - a Redis master whose maxmemory-policy may evict is refused: grants
 *     503 redis_may_evict, /readyz 503 naming master and policy, an error
 *     line; ids refused under allkeys-* only; --accept-eviction-risk 1
 *     grants and says so at start; found at start and by the periodic
 *     check (also against a Cluster: LOCKGATE_TEST_CLUSTER=1), and after a
 *     Sentinel failover to a replica with such a policy;
 *   - a master that loses its data (a restart without persistence, then a
 *     FLUSHALL) is noticed: an error line, a count, /readyz 503, and no
 *     lock is granted (503 redis_data_lost, Retry-After) until
 *     --max-lease-ms has passed; fences keep increasing; a master with
 *     neither AOF nor a replica is warned about at start; a grant (lock,
 *     multi-lock) answered after the loss was noticed is given back and
 *     answered 503 redis_data_lost;
 *   - holders can always let go: with Redis full under noeviction,
 *     release, extend, forced release, session end, multi-lock extend and
 *     release and a fair waiter leaving its queue all succeed, and new
 *     grants get 503 redis_out_of_memory;
 *
 * `build/tests/test_safety NAME` runs only the tests whose names contain
 * NAME. */
#include "tests/integration/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;

static const char *build_dir(void) { return getenv("BUILD") ? getenv("BUILD") : "build"; }

/* Lines of a file that contain needle. */
/* ---- configuration refused at start --------------------------------------------- */

/* Runs the gateway with flags; out gets its stderr, returns its exit status. */
static int start_refused(const char *flags, char *out, size_t cap) {
    char cmd[1024];
    /* timeout: a gateway that starts (as before the fix) must not hang the suite. */
    snprintf(cmd, sizeof cmd,
             "timeout 20 %s/lockgate --listen 127.0.0.1:%d --redis redis://127.0.0.1:%d %s 2>&1",
             build_dir(), h_free_port(), redis.port, flags);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, cap - 1, p) : 0;
    out[n] = '\0';
    int st = p ? pclose(p) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_brace_prefixes_refused(void) {
    /* The three, and a lone closing brace: each would move keys or
     * channels out of the name's slot in Redis Cluster. */
    const char *flags[] = {"--key-prefix '{app}:'", "--key-prefix 'lg{{'", "--key-prefix 'a{}b:'",
                           "--key-prefix 'x}'"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        char out[2048];
        CHECK_EQ_INT(start_refused(flags[i], out, sizeof out), 2);
        CHECK(strstr(out, "key prefix") != NULL);
        int lines = 0;
        for (const char *c = out; *c; c++) lines += *c == '\n';
        CHECK_EQ_INT(lines, 1);
    }
}

/* ---- signals during start-up ------------------------------------------------------ */

/* The gateway is held in auth_load: its auth file is a FIFO, whose open
 * returns only once a writer comes, and whose read ends when the writer
 * closes. */
struct fifo_feed {
    pthread_t th;
    const char *path;
    const char *log; /* the gateway's stderr */
    atomic_int pid;  /* the gateway's, set by the starter */
    int sig;         /* sent while the gateway reads its auth file */
    int reloads;     /* more opens to feed afterwards (a SIGHUP's reread) */
    int fed;         /* opens fed */
    int sent;        /* the signal went while the gateway was in auth_load */
};

/* Opens the FIFO for writing once the gateway opened it for reading (ENXIO
 * until then); -1 after 20 s. */
static int fifo_writer(const char *path) {
    for (long long end = h_now_ms() + 20000; h_now_ms() < end; h_sleep_ms(2)) {
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) return fd;
        if (errno != ENXIO) return -1;
    }
    return -1;
}

static const char AUTH_TEXT[] = "{\"keys\": []}\n";

static void *fifo_feed_main(void *arg) {
    struct fifo_feed *ff = arg;
    for (int i = 0; i <= ff->reloads; i++) {
        /* A reread opens the FIFO anew only after the first read closed
         * it: wait for the line that announces it. */
        for (long long end = h_now_ms() + 20000;
             i > 0 && !h_file_count(ff->log, "SIGHUP received") && h_now_ms() < end;)
            h_sleep_ms(5);
        int fd = fifo_writer(ff->path);
        if (fd < 0) break;
        if (i == 0) {
            int pid = 0;
            for (long long end = h_now_ms() + 5000;
                 !(pid = atomic_load(&ff->pid)) && h_now_ms() < end;)
                h_sleep_ms(1);
            /* The reader is in fopen/fread of auth_load now, before the
             * workers and before the old sigwait. */
            if (pid > 0) ff->sent = kill(pid, ff->sig) == 0;
            h_sleep_ms(100); /* the signal is delivered (or pending) before start goes on */
        }
        ssize_t w = write(fd, AUTH_TEXT, sizeof AUTH_TEXT - 1);
        close(fd);
        if (w == (ssize_t)sizeof AUTH_TEXT - 1) ff->fed++;
    }
    return NULL;
}

/* Starts the gateway with the FIFO as auth file, stderr to log; its pid. */
static pid_t spawn_gateway(int port, const char *auth, const char *log) {
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        char listen[64], url[64], exe[256];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
        snprintf(url, sizeof url, "redis://127.0.0.1:%d", redis.port);
        snprintf(exe, sizeof exe, "%s/lockgate", build_dir());
        execl(exe, exe, "--listen", listen, "--redis", url, "--auth-file", auth, "--workers", "1",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for pid to exit (up to ms); its wait status, or -1 (then it is
 * killed). */
static int wait_exit(pid_t pid, int ms) {
    int st;
    for (long long end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(5))
        if (waitpid(pid, &st, WNOHANG) == pid) return st;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void signal_at_start(int sig) {
    char fifo[160], log[160];
    snprintf(fifo, sizeof fifo, "%s/auth-%d.fifo", redis.dir, sig);
    snprintf(log, sizeof log, "%s/gw-sig-%d.log", redis.dir, sig);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    struct fifo_feed ff = {.path = fifo, .log = log, .sig = sig, .reloads = sig == SIGHUP ? 1 : 0};
    pthread_create(&ff.th, NULL, fifo_feed_main, &ff);
    int port = h_free_port();
    pid_t pid = spawn_gateway(port, fifo, log);
    atomic_store(&ff.pid, pid);
    pthread_join(ff.th, NULL);
    CHECK(ff.sent);
    if (sig == SIGHUP) {
        /* It lived through the SIGHUP, read the file again for it (the
         * second open was fed), and serves. */
        CHECK_EQ_INT(ff.fed, 2);
        struct h_resp r = {0};
        for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20)) {
            h_resp_free(&r);
            r = h_http("GET", port, "/healthz", NULL, NULL, NULL);
            if (r.status == 200) break;
        }
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        /* The reread is logged by the main thread, which may come after a
         * worker answered /healthz (a clean-clone CI run saw the line 3 ms
         * after the check): wait for it. */
        for (long long end = h_now_ms() + 10000;
             h_file_count(log, "auth: reloaded") < 1 && h_now_ms() < end; h_sleep_ms(10)) {}
        CHECK(h_file_count(log, "SIGHUP received") == 1);
        CHECK(h_file_count(log, "auth: reloaded") == 1);
        kill(pid, SIGTERM);
    } else {
        CHECK_EQ_INT(ff.fed, 1);
    }
    /* SIGTERM (sent at start, or now): a clean stop, exit 0. */
    int st = wait_exit(pid, 15000);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(h_file_count(log, "SIGTERM received") == 1);
    CHECK(h_file_count(log, "lockgate stopped") == 1);
    if (check_cur_failed) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "cat %s >&2", log);
        if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
    }
    unlink(fifo);
}

static void test_sighup_at_start(void) { signal_at_start(SIGHUP); }
static void test_sigterm_at_start(void) { signal_at_start(SIGTERM); }

/* ---- Redis full (noeviction) ------------------------------------------------------- */

static long post_status(const char *path, const char *body, const char *hdr, char *token,
                        size_t cap) {
    struct h_resp r = h_http("POST", gw.port, path, NULL, body, hdr);
    long st = r.status;
    if (token && cap)
        snprintf(token, cap, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    return st;
}

/* status and code of one request */
static long call_code(const char *method, const char *path, const char *token, const char *body,
                      const char *hdr, char *code, size_t cap) {
    struct h_resp r = h_http(method, gw.port, path, token, body, hdr);
    long st = r.status;
    snprintf(code, cap, "%s", h_jcode(&r) ? h_jcode(&r) : "");
    h_resp_free(&r);
    return st;
}

struct waiter_call {
    pthread_t th;
    long status;
    char code[48];
};

static void *fair_waiter_main(void *arg) {
    struct waiter_call *w = arg;
    w->status = call_code("POST", "/v1/locks/oom-a", NULL,
                          "{\"ttl_ms\":60000,\"wait_ms\":2500,\"fair\":true}", NULL, w->code,
                          sizeof w->code);
    return NULL;
}

static void test_full_redis_lets_holders_go(void) {
    char ta[128], ts[128], tp[128], tm[128], sess[128], tl[128], code[48];
    CHECK_EQ_INT(post_status("/v1/locks/oom-a", "{\"ttl_ms\":60000}", NULL, ta, sizeof ta), 201);
    CHECK_EQ_INT(
        post_status("/v1/locks/oom-s", "{\"ttl_ms\":60000,\"shared\":true}", NULL, ts, sizeof ts),
        201);
    CHECK_EQ_INT(
        post_status("/v1/semaphores/oom-p", "{\"ttl_ms\":60000,\"limit\":2}", NULL, tp, sizeof tp),
        201);
    CHECK_EQ_INT(post_status("/v1/locks", "{\"ttl_ms\":60000,\"names\":[\"oom-m1\",\"oom-m2\"]}",
                             NULL, tm, sizeof tm),
                 201);
    struct h_resp r = h_http("POST", gw.port, "/v1/sessions", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(sess, sizeof sess, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    char shdr[200];
    snprintf(shdr, sizeof shdr, "Session: %s", sess);
    CHECK_EQ_INT(post_status("/v1/locks/oom-l", "{}", shdr, tl, sizeof tl), 201);
    /* A fair waiter queued on oom-a: it leaves the queue while Redis is full. */
    struct waiter_call w = {0};
    pthread_create(&w.th, NULL, fair_waiter_main, &w);
    for (long long end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(5)) {
        const char *n = h_redis_cli(&redis, "ZCARD lockgate:lock:{oom-a}:q");
        if (n && strcmp(n, "1") == 0) break;
    }
    CHECK_EQ_STR(h_redis_cli(&redis, "ZCARD lockgate:lock:{oom-a}:q"), "1");

    /* Full: every command that adds memory is refused. */
    h_redis_cli(&redis, "CONFIG SET maxmemory-policy noeviction");
    h_redis_cli(&redis, "CONFIG SET maxmemory 1");

    CHECK_EQ_INT(call_code("POST", "/v1/locks/oom-new", NULL, "{}", NULL, code, sizeof code), 503);
    CHECK_EQ_STR(code, "redis_out_of_memory");
    CHECK_EQ_INT(call_code("POST", "/v1/semaphores/oom-newp", NULL, "{\"limit\":2}", NULL, code,
                           sizeof code),
                 503);
    CHECK_EQ_STR(code, "redis_out_of_memory");
    CHECK_EQ_INT(call_code("POST", "/v1/locks", NULL, "{\"names\":[\"oom-n1\",\"oom-n2\"]}", NULL,
                           code, sizeof code),
                 503);
    CHECK_EQ_STR(code, "redis_out_of_memory");
    CHECK_EQ_INT(call_code("POST", "/v1/sessions", NULL, "{}", NULL, code, sizeof code), 503);
    CHECK_EQ_STR(code, "redis_out_of_memory");

    /* The waiter gives up at its deadline and leaves the queue. */
    pthread_join(w.th, NULL);
    CHECK(w.status == 503 || w.status == 409);
    CHECK_EQ_STR(h_redis_cli(&redis, "EXISTS lockgate:lock:{oom-a}:q"), "0");

    /* Letting go, and extending, add no memory. */
    CHECK_EQ_INT(
        call_code("PATCH", "/v1/locks/oom-a", ta, "{\"ttl_ms\":30000}", NULL, code, sizeof code),
        200);
    CHECK_EQ_INT(call_code("DELETE", "/v1/locks/oom-a", ta, NULL, NULL, code, sizeof code), 200);
    CHECK_EQ_INT(
        call_code("DELETE", "/v1/locks/oom-s?force=true", NULL, NULL, NULL, code, sizeof code),
        200);
    CHECK_EQ_INT(call_code("DELETE", "/v1/semaphores/oom-p", tp, NULL, NULL, code, sizeof code),
                 200);
    CHECK_EQ_INT(call_code("PATCH", "/v1/locks", tm,
                           "{\"ttl_ms\":30000,\"names\":[\"oom-m1\",\"oom-m2\"]}", NULL, code,
                           sizeof code),
                 200);
    CHECK_EQ_INT(call_code("DELETE", "/v1/locks", tm, "{\"names\":[\"oom-m1\",\"oom-m2\"]}", NULL,
                           code, sizeof code),
                 200);
    char spath[200];
    snprintf(spath, sizeof spath, "/v1/sessions/%s", sess);
    CHECK_EQ_INT(call_code("DELETE", spath, NULL, NULL, NULL, code, sizeof code), 200);
    /* Nothing is held any more. */
    const char *names[] = {"/v1/locks/oom-a",  "/v1/locks/oom-s",  "/v1/semaphores/oom-p",
                           "/v1/locks/oom-m1", "/v1/locks/oom-m2", "/v1/locks/oom-l"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        CHECK_EQ_INT(call_code("GET", names[i], NULL, NULL, NULL, code, sizeof code), 404);
    }

    h_redis_cli(&redis, "CONFIG SET maxmemory 0");
    CHECK_EQ_INT(call_code("POST", "/v1/locks/oom-new", NULL, "{}", NULL, code, sizeof code), 201);
}

/* ---- a stall during an acquire ------------------------------------------------------ */

#define UNDO_BOUND_MS 1500 /* the target is 1 s; margin for a loaded machine */

/* Waits until the gateway's n undos have settled (given back, or nothing
 * there to give), and checks that n were started and none left to its
 * lease. */
static void undos_settled(struct h_gw *g, long long n) {
    for (long long end = h_now_ms() + 5000; h_metric(g, "lockgate_undo_given_back_total") +
                                                    h_metric(g, "lockgate_undo_nothing_total") <
                                                n &&
                                            h_now_ms() < end;)
        h_sleep_ms(10);
    CHECK_EQ_INT(h_metric(g, "lockgate_undo_started_total"), n);
    CHECK_EQ_INT(h_metric(g, "lockgate_undo_given_back_total") +
                     h_metric(g, "lockgate_undo_nothing_total"),
                 n);
    CHECK_EQ_INT(h_metric(g, "lockgate_undo_expired_total"), 0);
}

/* The stall of the Redis whose process is pid (the gateway's master),
 * while g sends an acquire.  inspect: the names' paths to look at,
 * separated by spaces. */
static void stall_during_acquire(struct h_gw *g, pid_t pid, const char *path, const char *body,
                                 const char *hdr, const char *inspect, long long *took) {
    CHECK(h_freeze(pid) == 0);
    struct h_resp r = h_http("POST", g->port, path, NULL, body, hdr);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);
    kill(pid, SIGCONT);
    long long t0 = h_now_ms();
    /* The attempt ran once Redis resumed, or was killed with its
     * connection; either way the names are free soon after. */
    char paths[256], *save = NULL;
    snprintf(paths, sizeof paths, "%s", inspect);
    for (char *one = strtok_r(paths, " ", &save); one; one = strtok_r(NULL, " ", &save)) {
        long st = 0;
        for (long long end = t0 + 10000; h_now_ms() < end; h_sleep_ms(5)) {
            struct h_resp got = h_http("GET", g->port, one, NULL, NULL, NULL);
            st = got.status;
            h_resp_free(&got);
            if (st == 404) break;
        }
        CHECK_EQ_INT(st, 404);
    }
    *took = h_now_ms() - t0;
}

static void test_stall_during_acquire(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1 --redis-timeout-ms 500 --liveness-ttl-ms 300000") < 0) {
        CHECK(!"gateway did not start");
        return;
    }
    /* A session-bound hold lives by its session: made before the stall. */
    struct h_resp r = h_http("POST", g.port, "/v1/sessions", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char shdr[200];
    snprintf(shdr, sizeof shdr, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    struct {
        const char *path, *body, *hdr, *inspect;
    } cases[] = {
        {"/v1/locks/stall-a",      "{\"ttl_ms\":60000}",                                       NULL, "/v1/locks/stall-a"},
        {"/v1/locks/stall-s",      "{\"ttl_ms\":60000,\"shared\":true}",                       NULL, "/v1/locks/stall-s"},
        {"/v1/semaphores/stall-p", "{\"ttl_ms\":60000,\"limit\":1}",                           NULL,
         "/v1/semaphores/stall-p"                                                                                       },
        {"/v1/locks",              "{\"ttl_ms\":60000,\"names\":[\"stall-m1\",\"stall-m2\"]}", NULL,
         "/v1/locks/stall-m1 /v1/locks/stall-m2"                                                                        },
        {"/v1/locks/stall-b",      "{}",                                                       shdr, "/v1/locks/stall-b"},
    };
    long long worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long long took = 0;
        stall_during_acquire(&g, redis.pid, cases[i].path, cases[i].body, cases[i].hdr,
                             cases[i].inspect, &took);
        if (took > worst) worst = took;
        CHECK(took <= UNDO_BOUND_MS);
    }
    fprintf(stderr, "  undo: names free at most %lld ms after Redis resumed\n", worst);
    /* Counted: every failed attempt settled (the multi-lock's name by
     * name), none left to its lease. */
    undos_settled(&g, 6);
    /* Never a token in the log. */
    CHECK_EQ_INT(h_file_count(g.log, "Lock-Token"), 0);
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
}

/* ---- a stall during a waiter's wake-up -------------------------------------------- */

struct post_call {
    pthread_t th;
    int port;
    char path[96];
    char body[160];
    long status;
    long long count;
    char token[128];
    long long done_ms; /* when the answer came */
    char code[48];     /* its problem code, "" for none */
    int retry_after;   /* it had a Retry-After header */
};

static void *post_main(void *arg) {
    struct post_call *c = arg;
    struct h_resp r = h_http("POST", c->port, c->path, NULL, c->body, NULL);
    c->status = r.status;
    c->done_ms = h_now_ms();
    c->count = h_jint(&r, "count");
    snprintf(c->code, sizeof c->code, "%s", h_jcode(&r) ? h_jcode(&r) : "");
    c->retry_after = h_header(&r, "Retry-After") != NULL;
    snprintf(c->token, sizeof c->token, "%s",
             h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    return NULL;
}

/* Waits until the gateway's log has more than n lines with needle. */
static int log_wait(struct h_gw *g, const char *needle, int n, int ms) {
    for (long long end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(5))
        if (h_file_count(g->log, needle) > n) return 1;
    return 0;
}

static void test_stall_during_wakeup(void) {
    /* One worker, and no liveness renewal during the test: the waiter's
     * attempt is the only command Redis is sent while it is stopped. */
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1 --redis-timeout-ms 500 --liveness-ttl-ms 300000") < 0) {
        CHECK(!"gateway did not start");
        return;
    }
    char code[48];
    struct h_resp r = h_http("POST", g.port, "/v1/locks/stall-w", NULL, "{\"ttl_ms\":1500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct post_call w = {.port = g.port};
    snprintf(w.path, sizeof w.path, "/v1/locks/stall-w");
    snprintf(w.body, sizeof w.body, "{\"ttl_ms\":60000,\"wait_ms\":20000}");
    pthread_create(&w.th, NULL, post_main, &w);
    for (long long end = h_now_ms() + 5000;
         h_metric(&g, "lockgate_waiting_requests") != 1 && h_now_ms() < end;)
        h_sleep_ms(2);
    CHECK_EQ_INT(h_metric(&g, "lockgate_waiting_requests"), 1);
    /* Redis stops; the holder's lease ends; the waiter wakes and sends its
     * attempt, which Redis holds past the command timeout. */
    int dropped = h_file_count(g.log, "gave no answer");
    CHECK(h_freeze(redis.pid) == 0);
    CHECK(log_wait(&g, "gave no answer", dropped, 10000));
    kill(redis.pid, SIGCONT);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 201);
    CHECK_EQ_INT(w.count, 1);
    /* One release frees it: no hidden level is left. */
    r = h_http("DELETE", g.port, "/v1/locks/stall-w", w.token, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, "\"released\":true") != NULL);
    h_resp_free(&r);
    /* The suite's gateway answers the GET: the freeze may have made it drop
     * its connection (its periodic reads went unanswered), and it is 503
     * until it has made it again. */
    CHECK_EQ_INT(h_wait_ready(gw.port, 5000), 0);
    CHECK_EQ_INT(call_code("GET", "/v1/locks/stall-w", NULL, NULL, NULL, code, sizeof code), 404);
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
}

/* The same for a multi-lock group: the waiter's retry finds its own
 * attempt's grant and answers it, 201 with every count 1, never a
 * re-entry (multi_acquire.lua ARGV 10). */
struct multi_post {
    pthread_t th;
    int port;
    long status;
    char body[2048];
    char token[128];
};

static void *multi_post_main(void *arg) {
    struct multi_post *c = arg;
    struct h_resp r = h_http("POST", c->port, "/v1/locks", NULL,
                             "{\"names\":[\"stall-mw1\",\"stall-mw2\"],\"ttl_ms\":60000,"
                             "\"wait_ms\":20000}",
                             NULL);
    c->status = r.status;
    snprintf(c->body, sizeof c->body, "%s", r.body ? r.body : "");
    snprintf(c->token, sizeof c->token, "%s",
             h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    return NULL;
}

static void test_stall_during_multi_wakeup(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1 --redis-timeout-ms 500 --liveness-ttl-ms 300000") < 0) {
        CHECK(!"gateway did not start");
        return;
    }
    char code[48];
    struct h_resp r =
        h_http("POST", g.port, "/v1/locks/stall-mw1", NULL, "{\"ttl_ms\":1500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct multi_post w = {.port = g.port};
    pthread_create(&w.th, NULL, multi_post_main, &w);
    for (long long end = h_now_ms() + 5000;
         h_metric(&g, "lockgate_waits_total") != 1 && h_now_ms() < end;)
        h_sleep_ms(2);
    CHECK_EQ_INT(h_metric(&g, "lockgate_waits_total"), 1);
    /* Redis stops; the holder's lease ends; the waiter's attempt is held
     * past the command timeout, runs when Redis resumes, and the waiter
     * tries again. */
    int dropped = h_file_count(g.log, "gave no answer");
    CHECK(h_freeze(redis.pid) == 0);
    CHECK(log_wait(&g, "gave no answer", dropped, 10000));
    kill(redis.pid, SIGCONT);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 201);
    CHECK(strstr(w.body, "\"count\":1") != NULL);
    CHECK(strstr(w.body, "\"count\":2") == NULL);
    /* One release frees both: no hidden level is left. */
    r = h_http("DELETE", g.port, "/v1/locks", w.token, "{\"names\":[\"stall-mw1\",\"stall-mw2\"]}",
               NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(h_wait_ready(gw.port, 5000), 0); /* as above */
    CHECK_EQ_INT(call_code("GET", "/v1/locks/stall-mw1", NULL, NULL, NULL, code, sizeof code), 404);
    CHECK_EQ_INT(call_code("GET", "/v1/locks/stall-mw2", NULL, NULL, NULL, code, sizeof code), 404);
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
}

/* ---- a Redis that may evict ------------------------------------------------------ */

/* The node whose policy the test sets: the Redis, or a cluster's node 0
 * (a master when the cluster starts). */
static void set_policy(const char *policy, const char *maxmemory) {
    char cmd[128];
    int nodes = redis.cn ? redis.cn : 1;
    for (int i = 0; i < nodes; i++) {
        struct h_redis n = redis.cn ? h_cluster_node(&redis, i) : redis;
        if (redis.cn && i > 0) break; /* one master is enough to refuse */
        snprintf(cmd, sizeof cmd, "CONFIG SET maxmemory-policy %s", policy);
        h_redis_cli(&n, cmd);
        snprintf(cmd, sizeof cmd, "CONFIG SET maxmemory %s", maxmemory);
        h_redis_cli(&n, cmd);
    }
}

static long gw_code(struct h_gw *g, const char *method, const char *path, const char *token,
                    const char *body, char *code, size_t cap, char *detail, size_t dcap) {
    struct h_resp r = h_http(method, g->port, path, token, body, NULL);
    long st = r.status;
    snprintf(code, cap, "%s", h_jcode(&r) ? h_jcode(&r) : "");
    if (detail) snprintf(detail, dcap, "%s", h_jstr(&r, "detail") ? h_jstr(&r, "detail") : "");
    h_resp_free(&r);
    return st;
}

/* Polls /readyz until its code is want ("" for 200); 1 when it was. */
static int readyz_wait(struct h_gw *g, const char *want, char *detail, size_t dcap, int ms) {
    char code[48];
    for (long long end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(20)) {
        long st = gw_code(g, "GET", "/readyz", NULL, NULL, code, sizeof code, detail, dcap);
        if (strcmp(code, want) == 0 && (st == 200) == (want[0] == '\0')) return 1;
    }
    return 0;
}

static void test_evicting_policy_refused(void) {
    char code[48], detail[300], tok[128];
    /* A lock held before: its holder can still let go. */
    CHECK_EQ_INT(post_status("/v1/locks/ev-held", "{\"ttl_ms\":60000}", NULL, tok, sizeof tok),
                 201);
    const char *policies[] = {"volatile-lru", "volatile-ttl", "allkeys-lru", "allkeys-random"};
    for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
        set_policy(policies[i], "100mb");
        struct h_gw g = {0};
        if (h_gw_up(&g, &redis, "--workers 2") < 0) {
            CHECK(!"gateway did not start");
            continue;
        }
        /* Found at start: /readyz names the master and its policy. */
        CHECK(readyz_wait(&g, "redis_may_evict", detail, sizeof detail, 10000));
        CHECK(strstr(detail, policies[i]) != NULL);
        CHECK(strstr(detail, "127.0.0.1:") != NULL);
        CHECK(log_wait(&g, "memguard: Redis master", 0, 5000));
        CHECK_EQ_INT(
            gw_code(&g, "POST", "/v1/locks/ev-new", NULL, "{}", code, sizeof code, NULL, 0), 503);
        CHECK_EQ_STR(code, "redis_may_evict");
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/semaphores/ev-sem", NULL, "{\"limit\":2}", code,
                             sizeof code, NULL, 0),
                     503);
        CHECK_EQ_STR(code, "redis_may_evict");
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/sessions", NULL, "{}", code, sizeof code, NULL, 0),
                     503);
        CHECK_EQ_STR(code, "redis_may_evict");
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/locks", NULL, "{\"names\":[\"ev-a\",\"ev-b\"]}", code,
                             sizeof code, NULL, 0),
                     503);
        CHECK_EQ_STR(code, "redis_may_evict");
        /* Ids: their marks have no TTL, so only allkeys-* may evict them. */
        long ids = gw_code(&g, "POST", "/v1/ids/ev-ids", NULL, NULL, code, sizeof code, NULL, 0);
        if (strncmp(policies[i], "allkeys-", 8) == 0) {
            CHECK_EQ_INT(ids, 503);
            CHECK_EQ_STR(code, "redis_may_evict");
        } else {
            CHECK_EQ_INT(ids, 200);
        }
        CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
    }
    /* The holder lets go. */
    CHECK_EQ_INT(call_code("DELETE", "/v1/locks/ev-held", tok, NULL, NULL, code, sizeof code), 200);

    /* Accepting the risk: said at start, and grants go on. */
    struct h_gw a = {0};
    if (h_gw_up(&a, &redis, "--accept-eviction-risk 1") == 0) {
        CHECK(h_file_count(a.log, "--accept-eviction-risk 1") >= 1);
        CHECK(readyz_wait(&a, "", detail, sizeof detail, 10000));
        CHECK(log_wait(&a, "memguard: Redis master", 0, 5000));
        CHECK_EQ_INT(
            gw_code(&a, "POST", "/v1/locks/ev-risk", NULL, "{}", code, sizeof code, NULL, 0), 201);
        CHECK_EQ_INT(h_gw_stop(&a, 6000), 0);
    } else {
        CHECK(!"gateway with --accept-eviction-risk did not start");
    }

    /* The periodic check: the running gateway (started under noeviction)
     * finds the policy changed, and finds it changed back. */
    set_policy("noeviction", "0");
    CHECK(readyz_wait(&gw, "", detail, sizeof detail, 15000));
    set_policy("volatile-lru", "100mb");
    CHECK(readyz_wait(&gw, "redis_may_evict", detail, sizeof detail, 15000));
    CHECK_EQ_INT(call_code("POST", "/v1/locks/ev-late", NULL, "{}", NULL, code, sizeof code), 503);
    CHECK_EQ_STR(code, "redis_may_evict");
    set_policy("noeviction", "0");
    CHECK(readyz_wait(&gw, "", detail, sizeof detail, 15000));
    CHECK_EQ_INT(call_code("POST", "/v1/locks/ev-late", NULL, "{}", NULL, code, sizeof code), 201);
}

/* ---- a master that lost its data ---------------------------------------------------- */

#define MAX_LEASE_MS 3000

/* Polls POST path on g until 201; the fence, and when it came in *at. */
static long long post_until_granted(struct h_gw *g, const char *path, long long *at, int *refused,
                                    int *retry_after_ok) {
    for (long long end = h_now_ms() + 20000; h_now_ms() < end; h_sleep_ms(50)) {
        struct h_resp r = h_http("POST", g->port, path, NULL, "{\"ttl_ms\":2000}", NULL);
        if (r.status == 201) {
            *at = h_now_ms();
            long long f = h_jint(&r, "fence");
            h_resp_free(&r);
            return f;
        }
        if (r.status == 503 && h_jcode(&r) && strcmp(h_jcode(&r), "redis_data_lost") == 0) {
            (*refused)++;
            const char *ra = h_header(&r, "Retry-After");
            if (ra && atoi(ra) >= 1 && atoi(ra) <= MAX_LEASE_MS / 1000 + 1) (*retry_after_ok)++;
        }
        h_resp_free(&r);
    }
    *at = -1;
    return -1;
}

static void test_data_loss_holds_off(void) {
    struct h_redis r2;
    struct h_gw g = {0};
    if (h_redis_start(&r2, 0, NULL) < 0 ||
        h_gw_up(&g, &r2, "--max-lease-ms 3000 --workers 2") < 0) {
        CHECK(!"redis or gateway did not start");
        return;
    }
    char code[48], detail[300];
    /* No AOF, no replica: said at start. */
    CHECK(log_wait(&g, "neither AOF persistence nor a replica", 0, 5000));
    /* No lease longer than the hold-off. */
    CHECK_EQ_INT(
        gw_code(&g, "POST", "/v1/locks/dl", NULL, "{\"ttl_ms\":5000}", code, sizeof code, NULL, 0),
        400);
    struct h_resp r = h_http("POST", g.port, "/v1/locks/dl", NULL, "{\"ttl_ms\":2500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    long long f1 = h_jint(&r, "fence");
    h_resp_free(&r);
    /* A waiter on another held lock: its retry after the loss is granted
     * by the empty Redis, given back, and it waits out the hold-off. */
    r = h_http("POST", g.port, "/v1/locks/dl-w", NULL, "{\"ttl_ms\":1000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct post_call w = {.port = g.port};
    snprintf(w.path, sizeof w.path, "/v1/locks/dl-w");
    snprintf(w.body, sizeof w.body, "{\"ttl_ms\":2000,\"wait_ms\":15000}");
    pthread_create(&w.th, NULL, post_main, &w);
    for (long long end = h_now_ms() + 5000;
         h_metric(&g, "lockgate_waiting_requests") != 1 && h_now_ms() < end;)
        h_sleep_ms(2);
    CHECK_EQ_INT(h_metric(&g, "lockgate_waiting_requests"), 1);

    /* A restart without persistence while the locks are held. */
    h_redis_kill(&r2);
    CHECK_EQ_INT(h_redis_restart(&r2, NULL), 0);
    CHECK(log_wait(&g, "lost its data", 0, 10000));
    long long seen = h_now_ms();
    CHECK(readyz_wait(&g, "redis_data_lost", detail, sizeof detail, 2000));
    CHECK(strstr(detail, "lost its data") != NULL);
    CHECK_EQ_INT(h_metric(&g, "lockgate_redis_data_lost_total"), 1);
    CHECK_EQ_INT(gw_code(&g, "POST", "/v1/semaphores/dl-sem", NULL, "{\"limit\":1}", code,
                         sizeof code, NULL, 0),
                 503);
    CHECK_EQ_STR(code, "redis_data_lost");
    int refused = 0, retry_ok = 0;
    long long at;
    long long f2 = post_until_granted(&g, "/v1/locks/dl", &at, &refused, &retry_ok);
    fprintf(stderr,
            "  data loss: granted again %lld ms after the loss was logged (hold-off %d ms)\n",
            at - seen, MAX_LEASE_MS);
    CHECK(refused > 0 && retry_ok == refused);
    CHECK(at - seen >= MAX_LEASE_MS - 300); /* the log line came after the noticing */
    CHECK(f2 > f1);
    CHECK(readyz_wait(&g, "", detail, sizeof detail, 2000));
    pthread_join(w.th, NULL);
    long long waited = w.done_ms - seen;
    fprintf(stderr, "  the waiter: %ld, done %lld ms after the loss was logged\n", w.status,
            waited);
    CHECK_EQ_INT(w.status, 201);
    CHECK(waited >= MAX_LEASE_MS - 300);

    /* FLUSHALL: noticed by the periodic check, every second. */
    long long flushed = h_now_ms();
    h_redis_cli(&r2, "FLUSHALL");
    CHECK(log_wait(&g, "lost its data", 1, 15000));
    fprintf(stderr, "  FLUSHALL noticed after %lld ms\n", h_now_ms() - flushed);
    CHECK(h_now_ms() - flushed <= 1000 + 500); /* LOSSGUARD_PERIOD_MS, and margin */
    CHECK_EQ_INT(gw_code(&g, "POST", "/v1/locks/dl-2", NULL, "{}", code, sizeof code, NULL, 0),
                 503);
    CHECK_EQ_STR(code, "redis_data_lost");
    CHECK_EQ_INT(h_metric(&g, "lockgate_redis_data_lost_total"), 2);
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
    h_redis_stop(&r2);
}

/* A grant whose answer comes after the loss was noticed, for a request
 * that does not wait: answered 503 redis_data_lost, nothing left held.  The gateway reaches its
 * master through a relay; the relay is moved to another Redis, empty and
 * stopped, so that the gateway's new connection carries its marker read
 * first and the acquires after it, all held in the stopped Redis's
 * socket: the requests passed the guard (no loss known yet), and once
 * the Redis runs, the marker's answer (a loss) comes before the grants'.
 * A lock and a multi-lock group. */
static void test_data_loss_late_grant(void) {
    struct h_redis r1, r2;
    struct h_relay relay;
    struct h_gw g = {0};
    memset(&r2, 0, sizeof r2);
    if (h_redis_start(&r1, 0, NULL) < 0 || h_relay_start(&relay, r1.port) < 0) {
        CHECK(!"redis or relay did not start");
        return;
    }
    struct h_redis via = r1; /* the gateway's Redis: the relay */
    via.port = relay.port;
    if (h_gw_up(&g, &via, "--workers 1 --max-lease-ms 3000") < 0 ||
        h_redis_start(&r2, 0, NULL) < 0) {
        CHECK(!"gateway or second redis did not start");
        goto out;
    }
    /* A grant: the gateway has seen the master's marker. */
    struct h_resp r = h_http("POST", g.port, "/v1/locks/late-held", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    CHECK_EQ_STR(h_redis_cli(&r1, "EXISTS lockgate:marker"), "1");
    /* The master is now an empty Redis, stopped: every connection the
     * gateway had is made again (the worker's and the ids' own). */
    int ups = h_log_count(&g, "command connection up"), was = ups;
    CHECK(h_freeze(r2.pid) == 0);
    h_relay_retarget(&relay, r2.port);
    for (long long end = h_now_ms() + 10000; h_now_ms() < end && ups < 2 * was; h_sleep_ms(5))
        ups = h_log_count(&g, "command connection up");
    CHECK_EQ_INT(ups, 2 * was);
    h_relay_watch(&relay, 0, "lock:{late-a}");
    h_relay_watch(&relay, 1, "lock:{late-m1}");
    struct post_call one = {.port = g.port}, multi = {.port = g.port};
    snprintf(one.path, sizeof one.path, "/v1/locks/late-a");
    snprintf(one.body, sizeof one.body, "{\"ttl_ms\":2000}");
    snprintf(multi.path, sizeof multi.path, "/v1/locks");
    snprintf(multi.body, sizeof multi.body,
             "{\"ttl_ms\":2000,\"names\":[\"late-m1\",\"late-m2\"]}");
    pthread_create(&one.th, NULL, post_main, &one);
    pthread_create(&multi.th, NULL, post_main, &multi);
    for (long long end = h_now_ms() + 5000;
         (!relay.watched[0] || !relay.watched[1]) && h_now_ms() < end;)
        h_sleep_ms(2);
    CHECK(relay.watched[0] && relay.watched[1]); /* both left, behind the marker read */
    kill(r2.pid, SIGCONT);
    pthread_join(one.th, NULL);
    pthread_join(multi.th, NULL);
    CHECK_EQ_INT(one.status, 503);
    CHECK_EQ_STR(one.code, "redis_data_lost");
    CHECK(one.retry_after);
    CHECK_EQ_INT(multi.status, 503);
    CHECK_EQ_STR(multi.code, "redis_data_lost");
    CHECK(multi.retry_after);
    /* Nothing is held.  The grant scripts check the marker the gateway
     * last read (lua/_marker_check.lua), so the stopped Redis refused
     * both grants itself: nothing was granted, nothing had to be given
     * back.  (Without that check, as in Cluster mode where a script
     * cannot read another slot's marker, both would be granted and given
     * back: holds.c and multi.c.) */
    CHECK_EQ_INT(h_metric(&g, "lockgate_given_back_total"), 0);
    CHECK_EQ_INT(h_metric(&g, "lockgate_redis_data_lost_total"), 1);
    const char *paths[] = {"/v1/locks/late-a", "/v1/locks/late-m1", "/v1/locks/late-m2"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        char code[48];
        long st = 0;
        for (long long end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(10))
            if ((st = gw_code(&g, "GET", paths[i], NULL, NULL, code, sizeof code, NULL, 0)) == 404)
                break;
        CHECK_EQ_INT(st, 404);
    }
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
out:
    h_relay_stop(&relay);
    if (r2.pid) h_redis_stop(&r2);
    h_redis_stop(&r1);
}

/* A Sentinel failover to a replica whose policy may evict: found on the
 * connection to the new master. */
static void test_evicting_policy_after_failover(void) {
    struct h_redis master, replica, sen[3];
    memset(sen, 0, sizeof sen);
    if (h_redis_start(&master, 0, NULL) < 0 || h_replica_start(&replica, &master) < 0) {
        CHECK(!"master and replica did not start");
        return;
    }
    h_redis_cli(&replica, "CONFIG SET maxmemory-policy volatile-ttl");
    h_redis_cli(&replica, "CONFIG SET maxmemory 100mb");
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++)
        ok = h_sentinel_start(&sen[i], &master, "evict", 2, 1000, 3000) == 0;
    for (int i = 0; i < 3 && ok; i++)
        ok = h_sentinel_wait_ready(&sen[i], "evict", 2, 1, 20000) == 0;
    CHECK(ok);
    struct h_gw g = {0};
    char flags[256], code[48], detail[300];
    snprintf(flags, sizeof flags,
             "--sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d "
             "--sentinel-master evict --workers 2",
             sen[0].port, sen[1].port, sen[2].port);
    if (ok && h_gw_up(&g, &master, flags) == 0) {
        CHECK(readyz_wait(&g, "", detail, sizeof detail, 10000));
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/locks/fo", NULL, "{}", code, sizeof code, NULL, 0),
                     201);
        h_redis_kill(&master);
        /* The gateway follows the failover; the new master may evict. */
        CHECK(readyz_wait(&g, "redis_may_evict", detail, sizeof detail, 30000));
        char port[16];
        snprintf(port, sizeof port, ":%d", replica.port);
        CHECK(strstr(detail, port) != NULL && strstr(detail, "volatile-ttl") != NULL);
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/locks/fo-2", NULL, "{}", code, sizeof code, NULL, 0),
                     503);
        CHECK_EQ_STR(code, "redis_may_evict");
        CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
    } else {
        CHECK(!"gateway in Sentinel mode did not start");
    }
    for (int i = 0; i < 3; i++)
        if (sen[i].pid) h_redis_stop(&sen[i]);
    h_redis_stop(&replica);
    if (master.pid) h_redis_stop(&master);
}

/* ---- Sentinel: a stall, then a failover to an empty replica ------------------------ */

/* A master, its replica and three sentinels watching it as "empty",
 * started by the first test that needs them and shared (a topology costs
 * seconds): test_stall_in_sentinel leaves it as it was,
 * test_failover_to_empty_replica ends it. */
static struct sentinel_set {
    struct h_redis master, replica, sen[3];
    int tried, ok;
} ss;

static struct sentinel_set *sentinels_up(void) {
    if (ss.tried) return ss.ok ? &ss : NULL;
    ss.tried = 1;
    if (h_redis_start(&ss.master, 0, NULL) < 0 || h_replica_start(&ss.replica, &ss.master) < 0)
        return NULL;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++)
        ok = h_sentinel_start(&ss.sen[i], &ss.master, "empty", 2, 1000, 3000) == 0;
    for (int i = 0; i < 3 && ok; i++)
        ok = h_sentinel_wait_ready(&ss.sen[i], "empty", 2, 1, 20000) == 0;
    ss.ok = ok;
    return ok ? &ss : NULL;
}

static void sentinels_down(void) {
    for (int i = 0; i < 3; i++)
        if (ss.sen[i].pid) h_redis_stop(&ss.sen[i]);
    if (ss.replica.pid) h_redis_stop(&ss.replica);
    if (ss.master.pid) h_redis_stop(&ss.master);
    ss.ok = 0;
}

/* How long the sentinels wait before they call the master down. */
static void sentinels_down_after(struct sentinel_set *t, int ms) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "SENTINEL SET empty down-after-milliseconds %d", ms);
    for (int i = 0; i < 3; i++) h_redis_cli(&t->sen[i], cmd);
}

/* The stall during an acquire (test_stall_during_acquire) in Sentinel
 * mode, for a multi-lock group and a session-bound hold: on the timeout
 * the gateway asks the sentinels again, they name the same master, and
 * once it answers what the attempt took is undone.  The sentinels are
 * told to wait longer than the stall before calling the master down: a
 * failover would be another test. */
static void test_stall_in_sentinel(void) {
    struct sentinel_set *t = sentinels_up();
    if (!t) {
        CHECK(!"Sentinel set did not start");
        return;
    }
    sentinels_down_after(t, 30000);
    struct h_gw g = {0};
    char flags[400];
    snprintf(flags, sizeof flags,
             "--sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d "
             "--sentinel-master empty --workers 1 --redis-timeout-ms 500 "
             "--liveness-ttl-ms 300000",
             t->sen[0].port, t->sen[1].port, t->sen[2].port);
    if (h_gw_up(&g, &t->master, flags) < 0 || h_wait_ready(g.port, 10000) < 0) {
        CHECK(!"gateway in Sentinel mode did not start");
        sentinels_down_after(t, 1000);
        return;
    }
    struct h_resp r = h_http("POST", g.port, "/v1/sessions", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char shdr[200];
    snprintf(shdr, sizeof shdr, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    long long took = 0, worst = 0;
    stall_during_acquire(&g, t->master.pid, "/v1/locks",
                         "{\"ttl_ms\":60000,\"names\":[\"sstall-m1\",\"sstall-m2\"]}", NULL,
                         "/v1/locks/sstall-m1 /v1/locks/sstall-m2", &took);
    CHECK(took <= UNDO_BOUND_MS);
    worst = took;
    stall_during_acquire(&g, t->master.pid, "/v1/locks/sstall-b", "{}", shdr, "/v1/locks/sstall-b",
                         &took);
    CHECK(took <= UNDO_BOUND_MS);
    if (took > worst) worst = took;
    fprintf(stderr, "  Sentinel: names free at most %lld ms after Redis resumed\n", worst);
    /* Every failed attempt settled: the multi-lock's two names, the hold. */
    undos_settled(&g, 3);
    CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
    sentinels_down_after(t, 1000);
}

/* A Sentinel failover to a replica that had lost what its master held
 * (here: made writable and flushed by itself before the failover): the
 * gateway finds the marker gone on the new master, and holds grants off
 * for --max-lease-ms, naming it in /readyz. */
static void test_failover_to_empty_replica(void) {
    struct sentinel_set *t = sentinels_up();
    CHECK(t != NULL);
    struct h_gw g = {0};
    char flags[300], code[48], detail[300];
    if (t) {
        snprintf(flags, sizeof flags,
                 "--sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d "
                 "--sentinel-master empty --workers 2 --max-lease-ms 60000",
                 t->sen[0].port, t->sen[1].port, t->sen[2].port);
    }
    if (t && h_gw_up(&g, &t->master, flags) == 0) {
        struct h_redis *replica = &t->replica;
        CHECK(readyz_wait(&g, "", detail, sizeof detail, 10000));
        CHECK_EQ_INT(gw_code(&g, "POST", "/v1/locks/fe", NULL, "{\"ttl_ms\":60000}", code,
                             sizeof code, NULL, 0),
                     201);
        /* The replica had the marker and the lock, then lost them. */
        const char *e = NULL;
        for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20))
            if ((e = h_redis_cli(replica, "EXISTS lockgate:lock:{fe}")) && strcmp(e, "1") == 0)
                break;
        CHECK_EQ_STR(h_redis_cli(replica, "EXISTS lockgate:marker"), "1");
        h_redis_cli(replica, "CONFIG SET replica-read-only no");
        h_redis_cli(replica, "FLUSHALL");
        CHECK_EQ_STR(h_redis_cli(replica, "EXISTS lockgate:marker"), "0");
        h_redis_kill(&t->master);
        /* The gateway follows the failover and finds the marker gone. */
        CHECK(readyz_wait(&g, "redis_data_lost", detail, sizeof detail, 30000));
        char port[16];
        snprintf(port, sizeof port, ":%d", replica->port);
        CHECK(strstr(detail, port) != NULL);
        struct h_resp r = h_http("POST", g.port, "/v1/locks/fe", NULL, "{}", NULL);
        CHECK_EQ_INT(r.status, 503);
        CHECK_EQ_STR(h_jcode(&r) ? h_jcode(&r) : "", "redis_data_lost");
        CHECK(h_header(&r, "Retry-After") != NULL);
        h_resp_free(&r);
        CHECK_EQ_INT(h_metric(&g, "lockgate_redis_data_lost_total"), 1);
        CHECK_EQ_INT(h_gw_stop(&g, 6000), 0);
    } else {
        CHECK(!"gateway in Sentinel mode did not start");
    }
    sentinels_down();
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    signal(SIGPIPE, SIG_IGN); /* a FIFO whose reader died */
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&gw, &redis, NULL) < 0) return 2;
    /* Against a Cluster (LOCKGATE_TEST_CLUSTER=1) only the policy check
     * runs: the others stop or fill one Redis. */
    if (!h_cluster_mode()) {
        RUN_SOME(test_brace_prefixes_refused);
        RUN_SOME(test_sighup_at_start);
        RUN_SOME(test_sigterm_at_start);
        RUN_SOME(test_full_redis_lets_holders_go);
        RUN_SOME(test_stall_during_acquire);
        RUN_SOME(test_stall_during_wakeup);
        RUN_SOME(test_stall_during_multi_wakeup);
        RUN_SOME(test_data_loss_holds_off);
        RUN_SOME(test_data_loss_late_grant);
        RUN_SOME(test_evicting_policy_after_failover);
        RUN_SOME(test_stall_in_sentinel);
        RUN_SOME(test_failover_to_empty_replica);
    }
    RUN_SOME(test_evicting_policy_refused);
    sentinels_down(); /* when test_failover_to_empty_replica did not run */
    h_gw_stop(&gw, 5000);
    h_redis_stop(&redis);
    return check_summary("safety");
}
