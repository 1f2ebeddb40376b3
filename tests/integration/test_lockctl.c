/* test_lockctl.c -- build/lockctl against a real gateway and redis-server:
 * the command-line API, exit statuses, and `run` -- mutual exclusion across
 * processes, renewal past many TTLs, a lost lease, signals, a gateway
 * restart.  lockctl runs as a subprocess ($BUILD/lockctl, BUILD default
 * "build"), through sh -c so that tests can write its command lines as
 * shell text. */
#include "tests/integration/harness.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Latency allowed on top of a deadline lockctl must meet (a request, a
 * process exit, a loaded machine, sanitizers). */
#define SLACK_MS 500

static struct h_redis redis;
static struct h_gw gw;
static char lc[256]; /* path of lockctl */
static char dir[64]; /* scratch directory for output files */

#define H(method, path, token, body) h_http(method, gw.port, path, token, body, NULL)

/* ---- running lockctl ----------------------------------------------------------- */

struct proc {
    pid_t pid;         /* sh -c "exec ..." -- lockctl itself once it runs */
    char out[96];      /* its stdout, a file */
    char err[96];      /* its stderr, a file */
    long long started; /* h_now_ms() at start */
};

#define MAX_PROCS 64
static pid_t procs[MAX_PROCS];

static void procs_kill_all(void) {
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i] > 0) {
            kill(procs[i], SIGKILL);
            waitpid(procs[i], NULL, 0);
            procs[i] = 0;
        }
}

static void procs_forget(pid_t pid) {
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i] == pid) procs[i] = 0;
}

/* Starts sh -c with the command built from fmt ("@" stands for lockctl's
 * path), stdin from /dev/null, stdout and stderr to files, and no other
 * descriptor open. */
static void start(struct proc *p, const char *fmt, ...) {
    static int seq;
    char tmpl[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmpl, sizeof tmpl, fmt, ap);
    va_end(ap);
    size_t o = 0;
    if (tmpl[0] == '@') o = (size_t)snprintf(cmd, sizeof cmd, "exec "); /* lockctl is p->pid */
    for (const char *s = tmpl; *s && o + sizeof lc < sizeof cmd; s++) {
        if (*s == '@')
            o += (size_t)snprintf(cmd + o, sizeof cmd - o, "%s", lc);
        else
            cmd[o++] = *s;
    }
    cmd[o] = '\0';
    seq++;
    snprintf(p->out, sizeof p->out, "%s/out.%d", dir, seq);
    snprintf(p->err, sizeof p->err, "%s/err.%d", dir, seq);
    p->started = h_now_ms();
    p->pid = fork();
    if (p->pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        for (int fd = 3; fd < 1024; fd++) close(fd);
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i] == 0) {
            procs[i] = p->pid;
            break;
        }
}

/* Waits up to timeout_ms; returns the exit status (128+N for signal N), or
 * -1 after killing it when it took longer. */
static int finish(struct proc *p, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) break;
        if (h_now_ms() >= end) {
            fprintf(stderr, "  lockctl (pid %d) still running after %d ms: killed\n", (int)p->pid,
                    timeout_ms);
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            procs_forget(p->pid);
            return -1;
        }
        h_sleep_ms(2);
    }
    procs_forget(p->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A whole file in a static buffer (one of four, so that a few may be held). */
static const char *slurp(const char *path) {
    static char bufs[4][16384];
    static int which;
    char *b = bufs[which++ % 4];
    b[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return b;
    size_t n = fread(b, 1, sizeof bufs[0] - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Runs lockctl to its end (20 s at most): its status; its output in p. */
static int run(struct proc *p, const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    start(p, "%s", cmd);
    return finish(p, 20000);
}

/* Waits until GET shows the lock held (or not, when held is 0). */
static int wait_held(const char *name, int held, int timeout_ms) {
    char path[256];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        struct h_resp r = H("GET", path, NULL, NULL);
        long status = r.status;
        h_resp_free(&r);
        if ((held && status == 200) || (!held && status == 404)) return 1;
        h_sleep_ms(10);
    }
    return 0;
}

/* Waits until the gateway's /readyz says it reaches Redis. */
static int wait_ready(int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        struct h_resp r = H("GET", "/readyz", NULL, NULL);
        long status = r.status;
        h_resp_free(&r);
        if (status == 200) return 1;
        h_sleep_ms(20);
    }
    return 0;
}

static long long fence_of(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = H("GET", path, NULL, NULL);
    long long f = r.status == 200 ? h_jint(&r, "fence") : -1;
    h_resp_free(&r);
    return f;
}

static long get_status(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = H("GET", path, NULL, NULL);
    long s = r.status;
    h_resp_free(&r);
    return s;
}

/* Takes a lock directly over HTTP; returns its token (caller frees). */
static char *hold(const char *name, int ttl_ms) {
    char path[256], body[64];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    snprintf(body, sizeof body, "{\"ttl_ms\":%d}", ttl_ms);
    struct h_resp r = H("POST", path, NULL, body);
    CHECK_EQ_INT(r.status, 201);
    char *t = h_header(&r, "Lock-Token") ? strdup(h_header(&r, "Lock-Token")) : NULL;
    h_resp_free(&r);
    return t;
}

/* Deletes every key of lock name behind the gateway's back, whatever the
 * key layout (lockgate:lock:{name}, per-kind prefixes, queues). */
static void delete_lock_keys(const char *name) {
    char args[512];
    snprintf(args, sizeof args,
             "EVAL \"local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
             "if not string.find(k, ':fence', 1, true) then redis.call('DEL', k) n = n + 1 end "
             "end return n\" 0 '*{%s}*'",
             name);
    const char *out = h_redis_cli(&redis, args);
    CHECK(out && atoi(out) >= 1);
}

static int is_gone(pid_t pid) {
    char path[64], st[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = '\0';
    const char *rp = strrchr(st, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z'; /* a zombie of init's is gone too */
}

/* ---- the command line ------------------------------------------------------------- */

static void test_usage_and_help(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ --version"), 0);
    CHECK(strncmp(slurp(p.out), "lockctl ", 8) == 0);
    CHECK_EQ_INT(run(&p, "@"), 64);
    CHECK_EQ_INT(run(&p, "@ frobnicate x"), 64);
    CHECK(strstr(slurp(p.err), "no command 'frobnicate'") != NULL);
    CHECK_EQ_INT(run(&p, "@ run"), 64);
    CHECK_EQ_INT(run(&p, "@ run x"), 64);
    CHECK_EQ_INT(run(&p, "@ run --ttl soon x -- true"), 64);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    CHECK_EQ_INT(run(&p, "@ release x --wait 5"), 64);
    CHECK_EQ_INT(run(&p, "@ status a b"), 64);
    CHECK_EQ_INT(run(&p, "@ id ns -n 0"), 64);
    const char *subs[] = {"run", "acquire", "extend", "release", "status", "id"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        CHECK_EQ_INT(run(&p, "@ %s --help", subs[i]), 0);
        CHECK(strstr(slurp(p.out), "Usage: lockctl ") != NULL);
        CHECK(strstr(slurp(p.out), "Exit status:") != NULL);
    }
    CHECK_EQ_INT(run(&p, "@ help run"), 0);
    CHECK(strstr(slurp(p.out), "76") != NULL);
}

static void test_errors_are_one_line(void) {
    struct proc p;
    /* A bad name: refused before anything is sent. */
    CHECK_EQ_INT(run(&p, "@ status 'bad name'"), 65);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    CHECK(strstr(slurp(p.err), "invalid_name") != NULL);
    CHECK_EQ_INT(run(&p, "@ run 'a/b' -- true"), 65);
    /* A field the gateway refuses (400 invalid_field): its detail and code. */
    CHECK_EQ_INT(run(&p, "@ acquire fields --ttl 50"), 65);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    CHECK(strstr(slurp(p.err), "ttl_ms") && strstr(slurp(p.err), "(invalid_field)"));
    /* Nobody listening. */
    int port = h_free_port();
    CHECK_EQ_INT(run(&p, "@ --url http://127.0.0.1:%d status x", port), 69);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    CHECK(strncmp(slurp(p.err), "lockctl: cannot reach the gateway", 33) == 0);
    CHECK_EQ_INT(
        run(&p, "LOCKGATE_URL=http://127.0.0.1:%d exec @ run x -- touch %s/ran", port, dir), 69);
    char ran[128];
    snprintf(ran, sizeof ran, "%s/ran", dir);
    CHECK(access(ran, F_OK) != 0);
    /* An answer that is no lockgate's: a 404 from an unknown path. */
    CHECK_EQ_INT(run(&p, "@ --url http://127.0.0.1:%d/nothing-here status x", gw.port), 65);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
}

static void test_acquire_extend_release_status(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ acquire -q cli1 --ttl 5000 --owner 'nightly job'"), 0);
    char token[160];
    snprintf(token, sizeof token, "%s", slurp(p.out));
    token[strcspn(token, "\n")] = '\0';
    CHECK_EQ_INT(strlen(token), 22);

    CHECK_EQ_INT(run(&p, "@ status cli1"), 0);
    CHECK(strstr(slurp(p.out), "\"owner\":\"nightly job\"") != NULL);
    CHECK(strstr(slurp(p.out), token) == NULL);

    /* Busy for a second taker. */
    CHECK_EQ_INT(run(&p, "@ acquire cli1"), 75);
    CHECK_EQ_STR(slurp(p.err), "lockctl: lock 'cli1' is held by someone else (try again in 5 s)\n");

    CHECK_EQ_INT(run(&p, "LOCKGATE_TOKEN=%s exec @ extend cli1 --ttl 60s", token), 0);
    CHECK(strstr(slurp(p.out), "\"ttl_ms\":60000") != NULL);
    CHECK_EQ_INT(run(&p, "@ extend cli1"), 64); /* no token */
    CHECK_EQ_INT(run(&p, "@ extend cli1 --token not-the-holder-token-0000"), 65);
    CHECK(strstr(slurp(p.err), "not_owner") != NULL);

    /* Re-entry with the same token, then two releases. */
    CHECK_EQ_INT(run(&p, "@ acquire cli1 --token %s", token), 0);
    CHECK(strstr(slurp(p.out), "\"count\":2") != NULL);
    CHECK_EQ_INT(run(&p, "@ release cli1 --token %s", token), 0);
    CHECK(strstr(slurp(p.out), "\"released\":false") != NULL);
    CHECK_EQ_INT(run(&p, "LOCKGATE_TOKEN=%s exec @ release -q cli1", token), 0);
    CHECK_EQ_STR(slurp(p.out), "");

    CHECK_EQ_INT(run(&p, "@ status cli1"), 1);
    CHECK_EQ_STR(slurp(p.err), "lockctl: lock 'cli1' is not held\n");
    CHECK_EQ_INT(run(&p, "@ status -q cli1"), 1);
    CHECK_EQ_STR(slurp(p.err), "");
    CHECK_EQ_INT(run(&p, "@ release cli1 --token %s", token), 65);
    CHECK(strstr(slurp(p.err), "not_held") != NULL);
}

static void test_id(void) {
    /* The id route must be served; say so plainly when it is not. */
    struct h_resp r = H("POST", "/v1/ids/lockctl?count=1", NULL, NULL);
    if (r.status == 404) {
        fprintf(stderr, "  FAIL: the gateway does not serve POST /v1/ids/{namespace} (404)\n");
        CHECK(!"/v1/ids is served");
    }
    h_resp_free(&r);
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ id lockctl -n 5"), 0);
    const char *out = slurp(p.out);
    CHECK_EQ_INT(count_lines(out), 5);
    unsigned long long prev = 0;
    int ok = 1;
    for (const char *s = out; *s;) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || *end != '\n' || v <= prev) ok = 0;
        prev = v;
        s = *end ? end + 1 : end;
    }
    CHECK(ok);
    CHECK_EQ_INT(run(&p, "@ id lockctl"), 0);
    CHECK_EQ_INT(count_lines(slurp(p.out)), 1);
    CHECK_EQ_INT(run(&p, "@ id 'no spaces'"), 65);
}

/* ---- run ---------------------------------------------------------------------------- */

static void test_run_environment_and_fds(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p,
                     "@ run envy -- sh -c 'echo \"$LOCKGATE_NAME $LOCKGATE_FENCE "
                     "$LOCKGATE_TOKEN\" > %s/env; "
                     "env -u LOCKGATE_TOKEN @ status envy > %s/get; ls /proc/self/fd'",
                     dir, dir),
                 0);
    /* Only stdin, stdout, stderr and ls's own directory: nothing leaked. */
    CHECK_EQ_STR(slurp(p.out), "0\n1\n2\n3\n");
    CHECK_EQ_STR(slurp(p.err), "");
    char path[128], name[64], token[64];
    unsigned long long fence = 0;
    snprintf(path, sizeof path, "%s/env", dir);
    CHECK_EQ_INT(sscanf(slurp(path), "%63s %llu %63s", name, &fence, token), 3);
    CHECK_EQ_STR(name, "envy");
    CHECK_EQ_INT(strlen(token), 22);
    snprintf(path, sizeof path, "%s/get", dir);
    char want[64];
    snprintf(want, sizeof want, "\"fence\":%llu", fence);
    CHECK(strstr(slurp(path), want) != NULL); /* held, with that fence */
    CHECK(strstr(slurp(path), "\"owner\":\"lockctl on ") != NULL);
    CHECK_EQ_INT(get_status("envy"), 404); /* released at the end */
}

static void test_run_exit_statuses(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ run ex -- sh -c 'exit 3'"), 3);
    CHECK_EQ_INT(get_status("ex"), 404);
    CHECK_EQ_INT(run(&p, "@ run ex -- true"), 0);
    CHECK_EQ_INT(run(&p, "@ run ex false"), 1); /* no "--" needed */
    CHECK_EQ_INT(run(&p, "@ run ex -- sh -c 'kill -KILL $$'"), 128 + SIGKILL);
    CHECK_EQ_INT(run(&p, "@ run ex -- sh -c 'kill -TERM $$'"), 128 + SIGTERM);
    CHECK_EQ_INT(get_status("ex"), 404);
    /* Options after NAME, and the command's own options left alone. */
    CHECK_EQ_INT(run(&p, "@ run ex --ttl 2s -q ls -d /"), 0);
    CHECK_EQ_STR(slurp(p.out), "/\n");
    CHECK_EQ_INT(run(&p, "@ run ex -- no-such-command-here"), 127);
    CHECK(strstr(slurp(p.err), "command not found") != NULL);
    char noexec[128];
    snprintf(noexec, sizeof noexec, "%s/noexec", dir);
    FILE *f = fopen(noexec, "w");
    if (f) fclose(f);
    CHECK_EQ_INT(run(&p, "@ run ex -- %s", noexec), 126);
    CHECK_EQ_INT(get_status("ex"), 404);
}

/* Eight processes, one file: each writes start, sleeps, writes end.  Under
 * the lock the lines pair up; without it they interleave. */
static void test_run_mutual_exclusion(void) {
    enum { N = 8 };
    char file[128];
    snprintf(file, sizeof file, "%s/mutex.log", dir);
    struct proc p[N];
    for (int i = 0; i < N; i++)
        start(&p[i],
              "@ run mutex --wait 30000 --ttl 2000 -- sh -c "
              "'echo start %d >> %s; sleep 0.1; echo end %d >> %s'",
              i, file, i, file);
    for (int i = 0; i < N; i++) CHECK_EQ_INT(finish(&p[i], 40000), 0);
    const char *log = slurp(file);
    CHECK_EQ_INT(count_lines(log), 2 * N);
    int seen[N] = {0}, ok = 1;
    const char *s = log;
    for (int i = 0; i < N && ok; i++) {
        int a = -1, b = -1;
        if (sscanf(s, "start %d\nend %d\n", &a, &b) != 2 || a != b || a < 0 || a >= N || seen[a])
            ok = 0;
        else
            seen[a] = 1;
        for (int k = 0; k < 2 && *s; k++) s = strchr(s, '\n') ? strchr(s, '\n') + 1 : "";
    }
    CHECK(ok);
    if (!ok) fprintf(stderr, "  mutex.log:\n%s", log);
    CHECK_EQ_INT(get_status("mutex"), 404);
}

static void test_run_outlives_ttl(void) {
    struct proc p;
    start(&p, "@ run --ttl 300 long -- sleep 2");
    CHECK(wait_held("long", 1, 2000));
    long long f1 = fence_of("long");
    h_sleep_ms(1500); /* 5 TTLs and more */
    CHECK_EQ_INT(get_status("long"), 200);
    CHECK_EQ_INT(fence_of("long"), f1);
    CHECK_EQ_INT(finish(&p, 5000), 0);
    CHECK(h_now_ms() - p.started >= 2000);
    CHECK_EQ_STR(slurp(p.err), "");
    CHECK_EQ_INT(get_status("long"), 404);
}

static void test_run_lost_lease(void) {
    /* TTL 900: renewed every 300 ms.  The lock vanishes: the next renewal
     * hears not_held, the command gets SIGTERM, lockctl exits 76 -- within
     * one renewal period, plus SLACK_MS for the request and the exits. */
    char file[128];
    snprintf(file, sizeof file, "%s/lost.log", dir);
    struct proc p;
    start(&p,
          "@ run --ttl 900 lost -- sh -c "
          "'trap \"echo TERM >> %s; exit 0\" TERM; sleep 30 & wait'",
          file);
    CHECK(wait_held("lost", 1, 2000));
    h_sleep_ms(100);
    long long t0 = h_now_ms();
    delete_lock_keys("lost");
    CHECK_EQ_INT(finish(&p, 5000), 76);
    long long took = h_now_ms() - t0;
    CHECK(took <= 300 + SLACK_MS);
    if (took > 300 + SLACK_MS) fprintf(stderr, "  lost lease noticed after %lld ms\n", took);
    CHECK_EQ_STR(slurp(file), "TERM\n");
    CHECK(strstr(slurp(p.err), "lockctl: lost lock 'lost'") != NULL);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
}

static void test_run_lost_lease_kill_after_grace(void) {
    /* A command deaf to SIGTERM, with a child: SIGKILL to the whole group
     * after --grace. */
    char file[128];
    snprintf(file, sizeof file, "%s/grace.pid", dir);
    struct proc p;
    start(&p,
          "@ run --ttl 600 --grace 300 deaf -- sh -c "
          "'trap \"\" TERM; sleep 30 & echo $! > %s; wait'",
          file);
    CHECK(wait_held("deaf", 1, 2000));
    h_sleep_ms(100);
    long long t0 = h_now_ms();
    delete_lock_keys("deaf");
    CHECK_EQ_INT(finish(&p, 5000), 76);
    long long took = h_now_ms() - t0;
    CHECK(took >= 300 && took <= 200 + 300 + SLACK_MS);
    if (took < 300 || took > 200 + 300 + SLACK_MS)
        fprintf(stderr, "  took %lld ms: %s", took, slurp(p.err));
    pid_t sleeper = (pid_t)atoi(slurp(file));
    CHECK(sleeper > 0);
    h_sleep_ms(50);
    CHECK(sleeper > 0 && is_gone(sleeper));
}

static void test_run_max_hold(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ run --ttl 300 --max-hold 700 mh -- sleep 10"), 76);
    CHECK(h_now_ms() - p.started < 3000);
    CHECK(strstr(slurp(p.err), "max-hold") != NULL);
    if (!strstr(slurp(p.err), "max-hold")) fprintf(stderr, "  stderr: %s", slurp(p.err));
}

static void test_run_signals(void) {
    /* SIGTERM to lockctl reaches the command (and its children: the sleep
     * is killed too, or the trap would wait for it), then the release. */
    char file[128];
    snprintf(file, sizeof file, "%s/sig.log", dir);
    struct proc p;
    start(&p,
          "@ run --ttl 5000 sig -- sh -c "
          "'trap \"echo TERM >> %s; exit 7\" TERM; while :; do sleep 1; done'",
          file);
    CHECK(wait_held("sig", 1, 2000));
    h_sleep_ms(100);
    kill(p.pid, SIGTERM);
    CHECK_EQ_INT(finish(&p, 3000), 7);
    CHECK_EQ_STR(slurp(file), "TERM\n");
    CHECK_EQ_INT(get_status("sig"), 404); /* released, not left to expire */

    start(&p, "@ run sig -- sleep 30");
    CHECK(wait_held("sig", 1, 2000));
    h_sleep_ms(100);
    kill(p.pid, SIGINT);
    CHECK_EQ_INT(finish(&p, 3000), 128 + SIGINT);
    CHECK_EQ_INT(get_status("sig"), 404);

    /* A signal while waiting for the lock: give up at once, run nothing. */
    char *tok = hold("sigwait", 10000);
    char ran[128];
    snprintf(ran, sizeof ran, "%s/sigwait.ran", dir);
    start(&p, "@ run --wait 20000 sigwait -- touch %s", ran);
    h_sleep_ms(300);
    long long t0 = h_now_ms();
    kill(p.pid, SIGTERM);
    CHECK_EQ_INT(finish(&p, 3000), 128 + SIGTERM);
    CHECK(h_now_ms() - t0 < 1500);
    CHECK(access(ran, F_OK) != 0);
    free(tok);
}

static void test_run_busy(void) {
    char *tok = hold("busy", 5000);
    char ran[128];
    snprintf(ran, sizeof ran, "%s/busy.ran", dir);
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ run busy -- touch %s", ran), 75);
    CHECK_EQ_STR(slurp(p.err), "lockctl: lock 'busy' is held by someone else (try again in 5 s)\n");
    CHECK(access(ran, F_OK) != 0);
    CHECK_EQ_INT(run(&p, "@ run -q busy -- touch %s", ran), 75);
    CHECK_EQ_STR(slurp(p.err), "");
    /* Waiting, then giving up. */
    CHECK_EQ_INT(run(&p, "@ run --wait 400 busy -- touch %s", ran), 75);
    long long took = h_now_ms() - p.started;
    CHECK(took >= 350 && took < 3000);
    CHECK(access(ran, F_OK) != 0);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    /* Waiting, and getting it when the holder lets go. */
    start(&p, "@ run --wait 10000 busy -- touch %s", ran);
    h_sleep_ms(300);
    struct h_resp r = H("DELETE", "/v1/locks/busy", tok, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(finish(&p, 10000), 0);
    CHECK(h_now_ms() - t0 < 2000);
    CHECK(access(ran, F_OK) == 0);
    free(tok);
}

/* Granted after waiting longer than its own TTL: the lease is dated by an
 * extension, not lost at once. */
static void test_run_wait_longer_than_ttl(void) {
    char *tok = hold("longwait", 1500);
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ run --wait 10000 --ttl 300 longwait -- sleep 0.5"), 0);
    long long took = h_now_ms() - p.started;
    CHECK(took >= 1400 && took < 6000);
    CHECK_EQ_STR(slurp(p.err), "");
    free(tok);
}

static void test_run_shared(void) {
    /* Two shared holders at once; an exclusive one finds it busy. */
    struct proc a, b, x;
    start(&a, "@ run --shared readers -- sleep 1");
    start(&b, "@ run --shared readers -- sleep 1");
    CHECK(wait_held("readers", 1, 2000));
    h_sleep_ms(200);
    CHECK_EQ_INT(run(&x, "@ run readers -- true"), 75);
    CHECK_EQ_INT(finish(&a, 5000), 0);
    CHECK_EQ_INT(finish(&b, 5000), 0);
    CHECK(h_now_ms() - a.started < 1900); /* together, not one after the other */
    CHECK_EQ_INT(get_status("readers"), 404);
}

static void test_run_survives_gateway_restart(void) {
    /* TTL 6 s, renewed every 2 s; the gateway is away 2 s, over a renewal.
     * (Generous: a gateway under sanitizers is slow to answer at first.) */
    struct proc p;
    start(&p, "@ -v run --ttl 6000 restart -- sleep 4");
    CHECK(wait_held("restart", 1, 2000));
    long long f1 = fence_of("restart");
    h_sleep_ms(300);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
    h_sleep_ms(2000);
    fprintf(stderr, "  gateway away %lld ms\n", h_now_ms() - t0);
    CHECK_EQ_INT(h_gw_start(&gw, &redis, NULL), 0);
    CHECK(wait_ready(3000));
    CHECK_EQ_INT(fence_of("restart"), f1);
    CHECK_EQ_INT(finish(&p, 10000), 0);
    CHECK(strstr(slurp(p.err), "cannot reach the gateway") != NULL); /* it did retry */
    CHECK(strstr(slurp(p.err), "lost") == NULL);
    if (strstr(slurp(p.err), "lost")) fprintf(stderr, "  stderr:\n%s", slurp(p.err));
    CHECK_EQ_INT(get_status("restart"), 404);
}

static void test_run_gateway_gone_past_lease(void) {
    /* The gateway stays away longer than the lease: the lease is lost. */
    struct proc p;
    start(&p, "@ run --ttl 600 away -- sleep 30");
    CHECK(wait_held("away", 1, 2000));
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(finish(&p, 5000), 76);
    long long took = h_now_ms() - t0;
    CHECK(took <= 600 + SLACK_MS);
    if (took > 600 + SLACK_MS)
        fprintf(stderr, "  lease loss noticed after %lld ms: %s", took, slurp(p.err));
    CHECK(strstr(slurp(p.err), "the lease ran out") != NULL);
    CHECK_EQ_INT(h_gw_start(&gw, &redis, NULL), 0);
}

/* ---- run --stream: the lock held by lockctl's connection ----------------------------- */

/* Waits until path exists (a file the command writes once it runs). */
static int wait_file(const char *path, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (access(path, F_OK) != 0) {
        if (h_now_ms() >= end) return 0;
        h_sleep_ms(5);
    }
    return 1;
}

/* Waits until lockctl's stderr (p->err) holds text. */
static int wait_err(const struct proc *p, const char *text, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (!strstr(slurp(p->err), text)) {
        if (h_now_ms() >= end) return 0;
        h_sleep_ms(5);
    }
    return 1;
}

/* kill -9 of `lockctl run --stream` while its command runs: its connection
 * closes, and another client waiting for the lock gets it within 1 s.  The
 * renewal mode, for contrast, leaves it held until its lease ends. */
static void test_run_stream_kill9_frees_at_once(void) {
    char ran[128];
    snprintf(ran, sizeof ran, "%s/sk9.ran", dir);
    struct proc p;
    start(&p, "@ run --stream --ttl 30000 sk9 -- sh -c 'touch %s; exec sleep 30'", ran);
    CHECK(wait_file(ran, 3000));
    CHECK_EQ_INT(get_status("sk9"), 200);
    /* Its stream's socket runs TCP keepalive (a gateway host that vanished
     * without closing ends the stream): ss shows the kernel's timer. */
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "ss -tnoH state established '( dport = :%d )' 2>/dev/null | grep -c keepalive",
             gw.port);
    FILE *ss = popen(cmd, "r");
    int keepalive = 0;
    if (ss && fscanf(ss, "%d", &keepalive) != 1) keepalive = -1;
    if (ss) pclose(ss);
    if (access("/usr/bin/ss", X_OK) == 0 || access("/bin/ss", X_OK) == 0)
        CHECK_EQ_INT(keepalive, 1);
    else
        fprintf(stderr, "  no ss(8): the stream socket's keepalive is not checked\n");
    long long t0 = h_now_ms();
    kill(p.pid, SIGKILL);
    struct h_resp r = H("POST", "/v1/locks/sk9", NULL, "{\"ttl_ms\":5000,\"wait_ms\":1000}");
    long long took = h_now_ms() - t0;
    CHECK_EQ_INT(r.status, 201);
    CHECK(took < 1000);
    fprintf(stderr, "  --stream: the next acquire got the lock %lld ms after kill -9\n", took);
    h_resp_free(&r);
    CHECK_EQ_INT(finish(&p, 2000), 128 + SIGKILL);

    snprintf(ran, sizeof ran, "%s/sk9b.ran", dir);
    start(&p, "@ run --ttl 30000 sk9b -- sh -c 'touch %s; exec sleep 30'", ran);
    CHECK(wait_file(ran, 3000));
    kill(p.pid, SIGKILL);
    CHECK_EQ_INT(finish(&p, 2000), 128 + SIGKILL);
    r = H("POST", "/v1/locks/sk9b", NULL, "{\"ttl_ms\":5000}");
    CHECK_EQ_INT(r.status, 409);
    fprintf(stderr, "  renewal mode: still held after kill -9 (retry_after_ms %lld)\n",
            h_jint(&r, "retry_after_ms"));
    h_resp_free(&r);
}

/* The command's exit status is lockctl's, it gets the lock's details as
 * with `run`, and the lock is free once lockctl has exited. */
static void test_run_stream_exit_status(void) {
    struct proc p;
    CHECK_EQ_INT(run(&p,
                     "@ run --stream sx -- sh -c 'echo \"$LOCKGATE_NAME $LOCKGATE_FENCE "
                     "$LOCKGATE_TOKEN\" > %s/sx.env; env -u LOCKGATE_TOKEN @ status sx > "
                     "%s/sx.get; exit 3'",
                     dir, dir),
                 3);
    CHECK_EQ_INT(get_status("sx"), 404); /* free right after */
    CHECK_EQ_STR(slurp(p.err), "");
    char path[128], name[64], token[64], want[64];
    unsigned long long fence = 0;
    snprintf(path, sizeof path, "%s/sx.env", dir);
    CHECK_EQ_INT(sscanf(slurp(path), "%63s %llu %63s", name, &fence, token), 3);
    CHECK_EQ_STR(name, "sx");
    CHECK_EQ_INT(strlen(token), 22);
    snprintf(path, sizeof path, "%s/sx.get", dir);
    snprintf(want, sizeof want, "\"fence\":%llu", fence);
    CHECK(strstr(slurp(path), want) != NULL); /* held while it ran, with that fence */
    CHECK_EQ_INT(run(&p, "@ run --stream sx -- true"), 0);
    CHECK_EQ_INT(get_status("sx"), 404);
    CHECK_EQ_INT(run(&p, "@ run --stream sx -- sh -c 'kill -TERM $$'"), 128 + SIGTERM);
    CHECK_EQ_INT(get_status("sx"), 404);
    CHECK_EQ_INT(run(&p, "@ run --stream sx -- no-such-command-here"), 127);
    /* What a stream cannot do: refused before anything is sent. */
    CHECK_EQ_INT(run(&p, "@ run --stream --session %s/sx.session sx -- true", dir), 64);
    CHECK(strstr(slurp(p.err), "--session") != NULL);
    CHECK_EQ_INT(run(&p, "@ run --stream --max-hold 5s sx -- true"), 64);
    CHECK(strstr(slurp(p.err), "--max-hold") != NULL);
}

/* A forced release while the command runs: lockctl hears `event: lost`,
 * stops the command as on a lost lease, and exits 76.  (The command's
 * shell writes no stderr: dash may say "Terminated" of its killed sleep,
 * and stderr is to hold lockctl's one line.) */
static void test_run_stream_forced_release(void) {
    char ready[128], log[128];
    snprintf(ready, sizeof ready, "%s/sf.ready", dir);
    snprintf(log, sizeof log, "%s/sf.log", dir);
    struct proc p;
    start(&p,
          "@ run --stream sf -- sh -c "
          "'exec 2>/dev/null; trap \"echo TERM >> %s; exit 0\" TERM; touch %s; sleep 30 & wait'",
          log, ready);
    CHECK(wait_file(ready, 3000));
    long long t0 = h_now_ms();
    struct h_resp r = H("DELETE", "/v1/locks/sf?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(finish(&p, 5000), 76);
    long long took = h_now_ms() - t0;
    CHECK(took < SLACK_MS);
    fprintf(stderr, "  lockctl exited 76 %lld ms after the forced release\n", took);
    CHECK_EQ_STR(slurp(log), "TERM\n");
    CHECK(strstr(slurp(p.err), "lockctl: lost lock 'sf'") != NULL);
    CHECK(strstr(slurp(p.err), "released") != NULL); /* the gateway's reason */
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    if (count_lines(slurp(p.err)) != 1) fprintf(stderr, "  stderr:\n%s", slurp(p.err));
    CHECK_EQ_INT(get_status("sf"), 404);
}

/* With the lock held by someone else, --wait waits over the stream and
 * runs the command once the holder lets go; a wait that runs out is busy. */
static void test_run_stream_waits(void) {
    char *tok = hold("sw", 10000);
    char ran[128];
    snprintf(ran, sizeof ran, "%s/sw.ran", dir);
    struct proc p;
    CHECK_EQ_INT(run(&p, "@ run --stream --wait 300 sw -- touch %s", ran), 75);
    CHECK_EQ_STR(slurp(p.err), "lockctl: lock 'sw' is held by someone else (try again in 10 s)\n");
    CHECK(access(ran, F_OK) != 0);

    start(&p, "@ -v run --stream --wait 10000 sw -- touch %s", ran);
    CHECK(wait_err(&p, "waiting for lock 'sw'", 3000)); /* the gateway's event: waiting */
    CHECK(access(ran, F_OK) != 0);
    struct h_resp r = H("DELETE", "/v1/locks/sw", tok, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(finish(&p, 5000), 0);
    CHECK(h_now_ms() - t0 < 1000);
    CHECK(access(ran, F_OK) == 0);
    CHECK_EQ_INT(get_status("sw"), 404);
    free(tok);
}

/* The stream ends with no `event: lost` (the gateway killed): a lost hold
 * too -- the command stopped, exit 76. */
static void test_run_stream_ends(void) {
    char ready[128], log[128];
    snprintf(ready, sizeof ready, "%s/se.ready", dir);
    snprintf(log, sizeof log, "%s/se.log", dir);
    struct proc p;
    start(&p,
          "@ run --stream --ttl 1000 se -- sh -c "
          "'exec 2>/dev/null; trap \"echo TERM >> %s; exit 0\" TERM; touch %s; sleep 30 & wait'",
          log, ready);
    CHECK(wait_file(ready, 3000));
    long long t0 = h_now_ms();
    h_gw_kill(&gw);
    CHECK_EQ_INT(finish(&p, 5000), 76);
    CHECK(h_now_ms() - t0 < SLACK_MS);
    CHECK_EQ_STR(slurp(log), "TERM\n");
    CHECK(strstr(slurp(p.err), "lockctl: lost lock 'se': the stream from the gateway") != NULL);
    CHECK_EQ_INT(count_lines(slurp(p.err)), 1);
    if (count_lines(slurp(p.err)) != 1) fprintf(stderr, "  stderr:\n%s", slurp(p.err));
    CHECK_EQ_INT(h_gw_start(&gw, &redis, NULL), 0);
    CHECK(wait_ready(3000));
}

int main(void) {
    const char *build = getenv("BUILD");
    snprintf(lc, sizeof lc, "%s/lockctl", build ? build : "build");
    if (access(lc, X_OK) != 0) {
        fprintf(stderr, "test_lockctl: %s is missing\n", lc);
        printf("lockctl: 0 passed, 1 failed\n");
        return 1;
    }
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_start(&gw, &redis, NULL) < 0) return 2;
    atexit(procs_kill_all);
    snprintf(dir, sizeof dir, "%.50s/lockctl", redis.dir); /* removed with redis's */
    mkdir(dir, 0755);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gw.port);
    setenv("LOCKGATE_URL", url, 1);
    unsetenv("LOCKGATE_TOKEN");

    RUN(test_usage_and_help);
    RUN(test_errors_are_one_line);
    RUN(test_acquire_extend_release_status);
    RUN(test_id);
    RUN(test_run_environment_and_fds);
    RUN(test_run_exit_statuses);
    RUN(test_run_mutual_exclusion);
    RUN(test_run_outlives_ttl);
    RUN(test_run_lost_lease);
    RUN(test_run_lost_lease_kill_after_grace);
    RUN(test_run_max_hold);
    RUN(test_run_signals);
    RUN(test_run_busy);
    RUN(test_run_wait_longer_than_ttl);
    RUN(test_run_shared);
    RUN(test_run_survives_gateway_restart);
    RUN(test_run_gateway_gone_past_lease);
    RUN(test_run_stream_kill9_frees_at_once);
    RUN(test_run_stream_exit_status);
    RUN(test_run_stream_forced_release);
    RUN(test_run_stream_waits);
    RUN(test_run_stream_ends);
    h_gw_stop(&gw, 5000);
    h_redis_stop(&redis);
    return check_summary("lockctl");
}
