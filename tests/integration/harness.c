/* harness.c -- see harness.h. */
#define _GNU_SOURCE /* accept4: the relay's sockets are close-on-exec */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- bookkeeping: kill what we started, whatever happens ------------------ */

#define MAX_CHILDREN 64
static pid_t children[MAX_CHILDREN];
static char dirs[MAX_CHILDREN][64];
static int ndirs;

/* Every child leads its own process group (spawn): the whole group goes,
 * so what a child started (nginx's worker, a command under lockctl) is
 * not left behind. */
static void cleanup(void) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0) {
            kill(-children[i], SIGCONT);
            kill(-children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    for (int i = 0; i < ndirs; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%.64s'", dirs[i]);
        if (system(cmd)) {}
    }
    ndirs = 0;
}

static void on_fatal(int sig) {
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void harness_init(void) {
    static int done;
    if (done) return;
    done = 1;
    /* Every gateway a test starts, in every mode (single, Sentinel,
     * quorum, Redis Cluster), runs its scripts behind lua/keycheck.lua: a
     * script touching a key it did not declare fails (503), whatever slot
     * is migrating and whether or not Redis would have let it
     * (server/scripts.h). */
    setenv("LOCKGATE_TEST_KEYCHECK", "1", 0);
    /* A stop is immediate unless a test asks for the delay a rolling
     * restart needs (--shutdown-delay-ms, default 5 s): every suite stops
     * its gateways with SIGTERM. */
    setenv("LOCKGATE_SHUTDOWN_DELAY_MS", "0", 0);
    atexit(cleanup);
    signal(SIGABRT, on_fatal);
    signal(SIGSEGV, on_fatal);
    signal(SIGINT, on_fatal);
    signal(SIGTERM, on_fatal);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void track(pid_t pid) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
}

static void untrack(pid_t pid) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid) children[i] = 0;
}

long long h_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

int h_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

void h_raise_nofile(unsigned long want) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

int h_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int port_open(int port) {
    int fd = h_connect(port);
    if (fd < 0) return 0;
    close(fd);
    return 1;
}

/* Runs argv (via sh -c cmd) with stdout/stderr to logfile; returns pid. */
static pid_t spawn(const char *cmd, const char *logfile) {
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(logfile ? logfile : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) track(pid);
    return pid;
}

pid_t h_spawn(const char *cmd, const char *logfile) {
    harness_init();
    return spawn(cmd, logfile);
}

/* ---- redis ------------------------------------------------------------------ */

const char *h_server(void) {
    const char *v = getenv("LOCKGATE_TEST_SERVER");
    return v && strcmp(v, "valkey") == 0 ? "valkey-server" : "redis-server";
}

/* Under LOCKGATE_TEST_SERVER=valkey, that the server on r is Valkey (its
 * INFO has valkey_version), so that a re-run can never pass against Redis
 * by mistake; 0 or -1. */
static int server_is_the_one_asked(struct h_redis *r) {
    if (strcmp(h_server(), "valkey-server") != 0) return 0;
    const char *info = h_redis_cli(r, "INFO server");
    if (info && strstr(info, "valkey_version:")) return 0;
    fprintf(stderr, "harness: the server on %d is not Valkey\n", r->port);
    return -1;
}

/* The one way a redis-server is started: on r's port and directory, with
 * --repl-diskless-sync-delay 0 so that a replica syncs at once (Redis 7
 * with --save '' syncs disklessly, by default after a 5 s delay), and extra
 * flags appended.  Waits until it answers PING. */
static int redis_launch(struct h_redis *r, const char *extra) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "exec %s --bind 127.0.0.1 --port %d --dir '%s' --save '' "
             "--appendonly %s --appendfsync always --protected-mode no --daemonize no "
             "--repl-diskless-sync-delay 0 %s",
             h_server(), r->port, r->dir, r->aof ? "yes" : "no", extra ? extra : "");
    char log[96];
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    r->pid = spawn(cmd, log);
    for (int i = 0; i < 500; i++) {
        const char *pong = h_redis_cli(r, "PING");
        if (pong && strcmp(pong, "PONG") == 0) return server_is_the_one_asked(r);
        h_sleep_ms(10);
    }
    fprintf(stderr, "harness: %s did not start on %d\n", h_server(), r->port);
    return -1;
}

int h_redis_start(struct h_redis *r, int aof, const char *extra) {
    harness_init();
    if (h_cluster_mode()) return h_cluster_start(r, 3, 1);
    memset(r, 0, sizeof *r);
    r->aof = aof;
    strcpy(r->dir, "/tmp/lockgate-test-XXXXXX");
    if (!mkdtemp(r->dir)) return -1;
    if (ndirs < MAX_CHILDREN) strcpy(dirs[ndirs++], r->dir);
    r->port = h_free_port();
    return redis_launch(r, extra);
}

int h_cluster_mode(void) {
    const char *v = getenv("LOCKGATE_TEST_CLUSTER");
    return v && v[0] && strcmp(v, "0") != 0;
}

struct h_redis h_cluster_node(struct h_redis *r, int i) {
    struct h_redis n = {.port = r->cport[i], .pid = r->cpid[i], .aof = r->aof};
    snprintf(n.dir, sizeof n.dir, "%s", r->dir);
    return n;
}

/* Each node keeps its own nodes.conf (and log) in the shared directory. */
int h_cluster_start(struct h_redis *r, int masters, int replicas) {
    harness_init();
    memset(r, 0, sizeof *r);
    strcpy(r->dir, "/tmp/lockgate-test-XXXXXX");
    if (!mkdtemp(r->dir)) return -1;
    if (ndirs < MAX_CHILDREN) strcpy(dirs[ndirs++], r->dir);
    int n = masters * (1 + replicas);
    if (n > H_CLUSTER_MAX) return -1;
    char create[1024];
    int used = snprintf(create, sizeof create, "--cluster create");
    for (int i = 0; i < n; i++) {
        /* The cluster bus listens on port + 10000: both must be free. */
        int port = 0;
        for (int tries = 0; tries < 1000 && !port; tries++) {
            port = h_free_port();
            int clash = port > 55535 || port_open(port + 10000);
            for (int j = 0; j < i && !clash; j++)
                clash = r->cport[j] == port || r->cport[j] + 10000 == port ||
                        r->cport[j] == port + 10000;
            if (clash) port = 0;
        }
        r->cport[i] = port;
        char cmd[1024], log[128];
        snprintf(cmd, sizeof cmd,
                 "exec %s --bind 127.0.0.1 --port %d --dir '%s' --save '' "
                 "--appendonly no --protected-mode no --daemonize no "
                 "--repl-diskless-sync-delay 0 --cluster-enabled yes "
                 "--cluster-config-file nodes-%d.conf --cluster-node-timeout 1500",
                 h_server(), port, r->dir, port);
        snprintf(log, sizeof log, "%s/redis-%d.log", r->dir, port);
        r->cpid[i] = spawn(cmd, log);
        r->cn = i + 1;
        used += snprintf(create + used, sizeof create - (size_t)used, " 127.0.0.1:%d", port);
    }
    r->port = r->cport[0];
    r->pid = r->cpid[0];
    for (int i = 0; i < n; i++) {
        struct h_redis node = h_cluster_node(r, i);
        int up = 0;
        for (int k = 0; k < 500 && !up; k++) {
            const char *pong = h_redis_cli(&node, "PING");
            up = pong && strcmp(pong, "PONG") == 0;
            if (!up) h_sleep_ms(10);
        }
        if (!up) {
            fprintf(stderr, "harness: cluster node %d did not start\n", node.port);
            return -1;
        }
    }
    snprintf(create + used, sizeof create - (size_t)used,
             " --cluster-replicas %d --cluster-yes >/dev/null", replicas);
    struct h_redis seed = h_cluster_node(r, 0);
    h_redis_cli(&seed, create);
    for (int k = 0; k < 1500; k++) {
        int ok = 0;
        for (int i = 0; i < n; i++) {
            struct h_redis node = h_cluster_node(r, i);
            const char *info = h_redis_cli(&node, "CLUSTER INFO");
            ok += info && strstr(info, "cluster_state:ok") != NULL;
        }
        if (ok == n) return 0;
        h_sleep_ms(20);
    }
    fprintf(stderr, "harness: the cluster did not come up (%s)\n", r->dir);
    return -1;
}

int h_redis_restart(struct h_redis *r, const char *extra) {
    if (r->pid) h_redis_kill(r);
    return redis_launch(r, extra);
}

static void reap(pid_t *pid, int sig) {
    if (*pid <= 0) return;
    kill(*pid, SIGCONT);
    kill(*pid, sig);
    waitpid(*pid, NULL, 0);
    untrack(*pid);
    *pid = 0;
}

void h_redis_kill(struct h_redis *r) { reap(&r->pid, SIGKILL); }

void h_redis_stop(struct h_redis *r) {
    for (int i = 0; i < r->cn; i++) {
        if (!r->cpid[i]) continue;
        struct h_redis n = h_cluster_node(r, i);
        h_redis_cli(&n, "SHUTDOWN NOSAVE");
        reap(&r->cpid[i], SIGKILL);
    }
    if (r->cn) r->pid = 0;
    if (r->pid) {
        h_redis_cli(r, "SHUTDOWN NOSAVE");
        reap(&r->pid, SIGKILL);
    }
}

const char *h_redis_cli(struct h_redis *r, const char *args) {
    static __thread char out[4096];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "redis-cli -h 127.0.0.1 -p %d %s%s 2>/dev/null", r->port,
             r->cn ? "-c " : "", args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    if (pclose(p) != 0 && n == 0) return NULL;
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r')) out[--n] = '\0';
    return out;
}

/* ---- gateway ----------------------------------------------------------------- */

int h_gw_start_env(struct h_gw *g, struct h_redis *r, const char *extra_flags,
                   const char *env_prefix) {
    harness_init();
    const char *build = getenv("BUILD");
    if (!build) build = "build";
    if (!g->port) g->port = h_free_port();
    if (!g->log[0]) snprintf(g->log, sizeof g->log, "%s/gw-%d.log", r->dir, g->port);
    char redis[160];
    if (g->redis_url[0])
        snprintf(redis, sizeof redis, "--redis%s %s", r->cn ? "-cluster" : "", g->redis_url);
    else if (r->cn)
        snprintf(redis, sizeof redis, "--redis-cluster 127.0.0.1:%d", r->port);
    else
        snprintf(redis, sizeof redis, "--redis redis://127.0.0.1:%d", r->port);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s %s/lockgate --listen 127.0.0.1:%d %s --log-level debug %s",
             env_prefix ? env_prefix : "", build, g->port, redis, extra_flags ? extra_flags : "");
    g->pid = spawn(cmd, g->log);
    for (int i = 0; i < 1000; i++) {
        if (port_open(g->port)) return 0;
        int st;
        if (waitpid(g->pid, &st, WNOHANG) == g->pid) break;
        h_sleep_ms(10);
    }
    fprintf(stderr, "harness: lockgate did not start (log: %s)\n", g->log);
    return -1;
}

int h_gw_start(struct h_gw *g, struct h_redis *r, const char *extra_flags) {
    return h_gw_start_env(g, r, extra_flags, NULL);
}

int h_gw_stop(struct h_gw *g, int timeout_ms) {
    if (g->pid <= 0) return -1;
    kill(g->pid, SIGTERM);
    long long end = h_now_ms() + timeout_ms;
    int st;
    while (h_now_ms() < end) {
        if (waitpid(g->pid, &st, WNOHANG) == g->pid) {
            untrack(g->pid);
            g->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        h_sleep_ms(5);
    }
    reap(&g->pid, SIGKILL);
    return -1;
}

void h_gw_kill(struct h_gw *g) { reap(&g->pid, SIGKILL); }

int h_freeze(pid_t pid) {
    kill(pid, SIGSTOP);
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    for (long long end = h_now_ms() + 2000; h_now_ms() < end; h_sleep_ms(1)) {
        DIR *d = opendir(dir);
        if (!d) return -1;
        int running = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[400], buf[256];
            snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            const char *st = strrchr(buf, ')'); /* "pid (comm) S ..." */
            if (st && st[1] == ' ' && st[2] != 'T' && st[2] != 't') running++;
        }
        closedir(d);
        if (!running) return 0;
    }
    return -1;
}

/* ---- HTTP ---------------------------------------------------------------------- */

struct sink {
    char *b;
    size_t len;
    size_t cap;
};

static size_t sink_write(char *p, size_t size, size_t n, void *ud) {
    struct sink *s = ud;
    size_t add = size * n;
    if (s->len + add + 1 > s->cap) {
        s->cap = (s->len + add + 1) * 2;
        s->b = realloc(s->b, s->cap);
    }
    memcpy(s->b + s->len, p, add);
    s->len += add;
    s->b[s->len] = '\0';
    return add;
}

static size_t header_write(char *p, size_t size, size_t n, void *ud) {
    struct h_resp *r = ud;
    size_t add = size * n, used = strlen(r->headers);
    if (used + add < sizeof r->headers) {
        memcpy(r->headers + used, p, add);
        r->headers[used + add] = '\0';
    }
    return add;
}

/* The one HTTP client: a request on the curl handle c, which keeps its
 * connection from one request to the next (h_client) or is used once
 * (h_http).  seconds is wall time, also when no answer came. */
static void request(struct h_resp *r, CURL *c, const char *method, int port, const char *path,
                    const char *token, const char *body, const char *extra_header) {
    memset(r, 0, sizeof *r);
    struct sink s = {calloc(1, 256), 0, 256};
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hs = NULL;
    char th[200];
    if (token) {
        snprintf(th, sizeof th, "Lock-Token: %s", token);
        hs = curl_slist_append(hs, th);
    }
    if (extra_header) hs = curl_slist_append(hs, extra_header);
    hs = curl_slist_append(hs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (strcmp(method, "GET") == 0 && !body) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long long t0 = h_now_ms();
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    r->seconds = (h_now_ms() - t0) / 1000.0;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hs);
    r->body = s.b;
    r->body_len = s.len;
    r->json = cJSON_Parse(r->body);
}

struct h_resp h_http(const char *method, int port, const char *path, const char *token,
                     const char *body, const char *extra_header) {
    harness_init();
    struct h_resp r;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    request(&r, c, method, port, path, token, body, extra_header);
    curl_easy_cleanup(c);
    return r;
}

const char *h_token(struct h_resp *r) {
    const char *t = h_header(r, "Lock-Token");
    return t ? t : "";
}

void h_resp_free(struct h_resp *r) {
    cJSON_Delete(r->json);
    free(r->body);
    memset(r, 0, sizeof *r);
}

const char *h_header(struct h_resp *r, const char *name) {
    static __thread char val[512];
    size_t nlen = strlen(name);
    for (const char *p = r->headers; *p;) {
        const char *eol = strstr(p, "\r\n");
        if (!eol) eol = p + strlen(p);
        if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (*v == ' ') v++;
            size_t vlen = (size_t)(eol - v);
            if (vlen >= sizeof val) vlen = sizeof val - 1;
            memcpy(val, v, vlen);
            val[vlen] = '\0';
            return val;
        }
        p = *eol ? eol + 2 : eol;
    }
    return NULL;
}

long long h_jint(struct h_resp *r, const char *key) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
    if (!cJSON_IsNumber(v)) return -999999;
    return (long long)v->valuedouble; /* exact below 2^53, which fences are */
}

const char *h_jstr(struct h_resp *r, const char *key) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    return NULL;
}

const char *h_jcode(struct h_resp *r) { return h_jstr(r, "code"); }

size_t h_raw(int port, const void *data, size_t len, char *out, size_t cap, int timeout_ms) {
    size_t got = 0;
    out[0] = '\0';
    int fd = h_connect(port);
    if (fd < 0) return 0;
    size_t sent = 0;
    while (sent < len) {
        ssize_t w = send(fd, (const char *)data + sent, len - sent, MSG_NOSIGNAL);
        if (w <= 0) break;
        sent += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    long long end = h_now_ms() + timeout_ms;
    while (got + 1 < cap) {
        int left = (int)(end - h_now_ms());
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
    return got;
}

/* ---- gateways under a wrapper that forks (faketime) ---------------------------- */


/* The processes whose parent is `parent`, found by scanning /proc (this
 * kernel has no /proc/PID/task/PID/children).  Returns how many, up to cap. */
static int children_of(pid_t parent, pid_t *out, int cap) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *p = strrchr(buf, ')'); /* the command may hold spaces */
        long ppid;
        if (p && sscanf(p + 1, " %*c %ld", &ppid) == 1 && ppid == parent) out[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

/* faketime(1) forks the gateway as its child and waits for it; a SIGTERM sent
 * to faketime kills faketime alone (the gateway lives on, orphaned, still
 * holding its port) and leaves faketime's /dev/shm objects behind.  So the
 * signal goes to the wrapper's children, and the wrapper exits by itself
 * with the gateway's exit status once the gateway is gone. */
int h_gw_stop_tree(struct h_gw *g, int timeout_ms) {
    if (g->pid <= 0) return -1;
    pid_t kids[8];
    int n = children_of(g->pid, kids, 8);
    if (n == 0) kill(g->pid, SIGTERM); /* no wrapper, or it exec'd */
    for (int i = 0; i < n; i++) kill(kids[i], SIGTERM);
    long long end = h_now_ms() + timeout_ms;
    int st;
    while (h_now_ms() < end) {
        if (waitpid(g->pid, &st, WNOHANG) == g->pid) {
            untrack(g->pid);
            g->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        h_sleep_ms(5);
    }
    h_gw_kill_tree(g);
    return -1;
}

/* SIGKILL to the wrapper's whole process group (spawn made it a group
 * leader), and faketime's shared-memory leftovers removed. */
void h_gw_kill_tree(struct h_gw *g) {
    if (g->pid <= 0) return;
    pid_t pid = g->pid;
    kill(-pid, SIGKILL);
    reap(&g->pid, SIGKILL);
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/faketime_shm_%d", (int)pid);
    unlink(path);
    snprintf(path, sizeof path, "/dev/shm/sem.faketime_sem_%d", (int)pid);
    unlink(path);
}

/* ---- replication, Sentinel, keep-alive clients (see harness.h) ------------------ */

long long h_redis_info_int(struct h_redis *r, const char *section, const char *field) {
    char args[96];
    snprintf(args, sizeof args, "INFO %s", section);
    const char *out = h_redis_cli(r, args);
    if (!out) return -1;
    char key[128];
    snprintf(key, sizeof key, "%s:", field);
    for (const char *p = out; (p = strstr(p, key)) != NULL; p++)
        if (p == out || p[-1] == '\n') return atoll(p + strlen(key));
    return -1;
}

int h_replica_wait_link(struct h_redis *r, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        const char *out = h_redis_cli(r, "INFO replication");
        if (out && strstr(out, "master_link_status:up") && strstr(out, "master_sync_in_progress:0"))
            return 0;
        h_sleep_ms(20);
    }
    return -1;
}

int h_replica_start(struct h_redis *r, struct h_redis *master) {
    char extra[64];
    snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d", master->port);
    if (h_redis_start(r, 0, extra) < 0) return -1;
    if (h_replica_wait_link(r, 10000) < 0) {
        fprintf(stderr, "harness: replica on %d did not sync with %d\n", r->port, master->port);
        return -1;
    }
    /* After a diskless sync the master streams writes to the replica only
     * from the replica's first REPLCONF ACK, which may come a second later
     * (INFO already says state=online).  Until then WAIT answers 0: wait
     * until a write is acknowledged. */
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "printf 'SET lockgate-harness:probe 1\\nWAIT 1 200\\nDEL lockgate-harness:probe\\n' | "
             "redis-cli -h 127.0.0.1 -p %d 2>/dev/null",
             master->port);
    for (int i = 0; i < 50; i++) {
        char out[256] = "";
        FILE *p = popen(cmd, "r");
        if (p) {
            size_t n = fread(out, 1, sizeof out - 1, p);
            out[n] = '\0';
            pclose(p);
        }
        if (strncmp(out, "OK\n1\n", 5) == 0) return 0;
        h_sleep_ms(50);
    }
    fprintf(stderr, "harness: replica %d does not acknowledge writes to %d\n", r->port,
            master->port);
    return -1;
}

int h_sentinel_start(struct h_redis *s, struct h_redis *master, const char *name, int quorum,
                     int down_after_ms, int failover_timeout_ms) {
    harness_init();
    memset(s, 0, sizeof *s);
    strcpy(s->dir, "/tmp/lockgate-test-XXXXXX");
    if (!mkdtemp(s->dir)) return -1;
    if (ndirs < MAX_CHILDREN) strcpy(dirs[ndirs++], s->dir);
    s->port = h_free_port();
    char conf[128];
    snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
    FILE *f = fopen(conf, "w");
    if (!f) return -1;
    fprintf(f,
            "port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\n"
            "sentinel resolve-hostnames no\n"
            "sentinel monitor %s 127.0.0.1 %d %d\n"
            "sentinel down-after-milliseconds %s %d\n"
            "sentinel failover-timeout %s %d\n"
            "sentinel parallel-syncs %s 1\n",
            s->port, s->dir, name, master->port, quorum, name, down_after_ms, name,
            failover_timeout_ms, name);
    fclose(f);
    char cmd[256], log[96];
    snprintf(cmd, sizeof cmd, "exec redis-sentinel '%s'", conf);
    snprintf(log, sizeof log, "%s/sentinel.log", s->dir);
    s->pid = spawn(cmd, log);
    for (int i = 0; i < 500; i++) {
        const char *pong = h_redis_cli(s, "PING");
        if (pong && strcmp(pong, "PONG") == 0) return 0;
        h_sleep_ms(10);
    }
    fprintf(stderr, "harness: redis-sentinel did not start on %d\n", s->port);
    return -1;
}

/* A field of SENTINEL MASTER name (redis-cli prints name and value on
 * alternate lines). */
static long long sentinel_field(struct h_redis *s, const char *name, const char *field) {
    char args[160];
    snprintf(args, sizeof args, "SENTINEL MASTER %s", name);
    const char *out = h_redis_cli(s, args);
    if (!out) return -1;
    size_t flen = strlen(field);
    for (const char *p = out; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) break;
        if ((size_t)(eol - p) == flen && strncmp(p, field, flen) == 0) return atoll(eol + 1);
        p = eol + 1;
    }
    return -1;
}

int h_sentinel_wait_ready(struct h_redis *s, const char *name, int others, int replicas,
                          int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        if (sentinel_field(s, name, "num-other-sentinels") >= others &&
            sentinel_field(s, name, "num-slaves") >= replicas)
            return 0;
        h_sleep_ms(100);
    }
    return -1;
}

int h_sentinel_master_port(struct h_redis *s, const char *name) {
    char args[160];
    snprintf(args, sizeof args, "SENTINEL get-master-addr-by-name %s", name);
    const char *out = h_redis_cli(s, args);
    const char *nl = out ? strchr(out, '\n') : NULL;
    return nl ? atoi(nl + 1) : -1;
}

void h_client_init(struct h_client *cl, long timeout_ms) {
    harness_init();
    memset(cl, 0, sizeof *cl);
    CURL *c = curl_easy_init();
    cl->curl = c;
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
}

void h_client_free(struct h_client *cl) {
    if (cl->curl) curl_easy_cleanup(cl->curl);
    cl->curl = NULL;
    h_resp_free(&cl->last);
}

long h_client_do(struct h_client *cl, const char *method, int port, const char *path,
                 const char *token, const char *body) {
    h_resp_free(&cl->last);
    request(&cl->last, cl->curl, method, port, path, token, body, NULL);
    return cl->last.status;
}

int h_gw_up(struct h_gw *g, struct h_redis *r, const char *flags) {
    for (int i = 0; i < 3; i++) {
        memset(g, 0, sizeof *g);
        if (h_gw_start(g, r, flags) == 0) return 0;
        char cmd[160];
        snprintf(cmd, sizeof cmd, "tail -n 20 '%s' | sed 's/^/    gw: /' >&2", g->log);
        if (system(cmd)) {}
        h_gw_kill(g);
    }
    return -1;
}

long long h_metric(struct h_gw *g, const char *name) {
    struct h_resp r = h_http("GET", g->port, "/metrics", NULL, NULL, NULL);
    long long v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = r.body ? strstr(r.body, key) : NULL;
    if (p) v = atoll(p + strlen(key));
    h_resp_free(&r);
    return v;
}

/* ---- a TCP relay the test controls ----------------------------------------------- */

static void relay_close(struct h_relay *r, int i) {
    close(r->a[i]);
    close(r->b[i]);
    r->a[i] = r->b[i] = -1;
}

/* Whether buf[0..len) contains s. */
static int contains(const char *buf, size_t len, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, s, n) == 0) return 1;
    return 0;
}

/* The relay's connection to its target (small_rcvbuf: set before
 * connecting, so that the window it advertises is small from the start). */
static int relay_connect(struct h_relay *r) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return -1;
    if (r->small_rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)r->target),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *relay_main(void *arg) {
    struct h_relay *r = arg;
    static __thread char buf[65536];
    while (!r->stop) {
        struct pollfd p[1 + 2 * H_RELAY_MAX];
        int idx[1 + 2 * H_RELAY_MAX], np = 0;
        if (r->hold) {
            for (int i = 0; i < r->n; i++) r->held[i] = 1;
            r->hold = 0;
        }
        if (r->drop) {
            for (int i = 0; i < r->n; i++)
                if (r->a[i] >= 0) relay_close(r, i);
            r->drop = 0;
        }
        p[np].fd = r->listen_fd, p[np].events = POLLIN, idx[np++] = -1;
        for (int i = 0; i < r->n; i++) {
            if (r->a[i] < 0 || r->held[i]) continue;
            p[np].fd = r->a[i], p[np].events = POLLIN, idx[np++] = 2 * i;
            p[np].fd = r->b[i], p[np].events = POLLIN, idx[np++] = 2 * i + 1;
        }
        if (poll(p, (nfds_t)np, 20) <= 0) continue;
        for (int k = 0; k < np; k++) {
            if (!p[k].revents) continue;
            if (idx[k] < 0) {
                /* Close-on-exec: a process the test starts later (a
                 * redis-server) must not keep a relayed connection open
                 * after the relay closed it. */
                int c = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                int t = c >= 0 ? relay_connect(r) : -1;
                int slot = -1;
                for (int i = 0; i < r->n && slot < 0; i++)
                    if (r->a[i] < 0 && !r->held[i]) slot = i;
                if (slot < 0 && r->n < H_RELAY_MAX) slot = r->n++;
                if (t < 0 || slot < 0) {
                    if (c >= 0) close(c);
                    if (t >= 0) close(t);
                    continue;
                }
                r->a[slot] = c, r->b[slot] = t, r->held[slot] = 0;
                continue;
            }
            int i = idx[k] / 2, from = idx[k] % 2 ? r->b[i] : r->a[i],
                to = idx[k] % 2 ? r->a[i] : r->b[i];
            if (r->held[i] || r->a[i] < 0) continue;
            ssize_t got = read(from, buf, sizeof buf);
            const char *on = r->hold_on;
            if (got > 0 && on && from == r->a[i] && contains(buf, (size_t)got, on)) {
                r->held[i] = 1; /* these bytes are lost, and the connection held */
                r->hold_on = NULL;
                continue;
            }
            for (int w = 0; got > 0 && from == r->a[i] && w < H_RELAY_WATCH; w++) {
                const char *s = r->watch[w];
                if (s && contains(buf, (size_t)got, s)) r->watched[w]++;
            }
            if (got <= 0 || write(to, buf, (size_t)got) != got) relay_close(r, i);
        }
    }
    for (int i = 0; i < r->n; i++)
        if (r->a[i] >= 0) relay_close(r, i);
    return NULL;
}

int h_relay_start(struct h_relay *r, int target_port) {
    memset(r, 0, sizeof *r);
    r->target = target_port;
    r->port = h_free_port();
    r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)r->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(r->listen_fd, 64) < 0) {
        close(r->listen_fd);
        return -1;
    }
    return pthread_create(&r->th, NULL, relay_main, r) == 0 ? 0 : -1;
}

void h_relay_hold_on(struct h_relay *r, const char *s) { r->hold_on = s; }

void h_relay_watch(struct h_relay *r, int k, const char *s) {
    r->watched[k] = 0;
    r->watch[k] = s;
}

void h_relay_hold(struct h_relay *r) {
    r->hold = 1;
    while (r->hold) h_sleep_ms(5); /* taken by the relay's next turn */
}

void h_relay_retarget(struct h_relay *r, int target_port) {
    r->target = target_port;
    r->drop = 1;
    while (r->drop) h_sleep_ms(5);
}

void h_relay_stop(struct h_relay *r) {
    r->stop = 1;
    pthread_join(r->th, NULL);
    close(r->listen_fd);
}

int h_wait_ready(int port, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        struct h_resp r = h_http("GET", port, "/readyz", NULL, NULL, NULL);
        long st = r.status;
        h_resp_free(&r);
        if (st == 200) return 0;
        h_sleep_ms(50);
    }
    return -1;
}

int h_file_count(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    if (f) fclose(f);
    return n;
}

int h_log_count(struct h_gw *g, const char *needle) { return h_file_count(g->log, needle); }

void h_timeshift_shim(char *out, size_t cap) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    if (build[0] == '/')
        snprintf(out, cap, "%s/tests/timeshift.so", build);
    else
        snprintf(out, cap, "%s/%s/tests/timeshift.so", getenv("PWD") ? getenv("PWD") : ".", build);
}

static char out_dir[128];
static char *out_buf;
static size_t out_cap;

void h_out_dir(const char *dir) { snprintf(out_dir, sizeof out_dir, "%s", dir); }

const char *h_out_text(const char *out) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", out_dir, out);
    size_t n = 0;
    FILE *f = fopen(path, "r");
    for (;;) {
        if (n + 4096 > out_cap) { /* grows to hold the whole file */
            out_cap = out_cap ? 2 * out_cap : 65536;
            out_buf = realloc(out_buf, out_cap);
            if (!out_buf) abort();
        }
        size_t got = f ? fread(out_buf + n, 1, out_cap - n - 1, f) : 0;
        n += got;
        if (got == 0) break;
    }
    if (f) fclose(f);
    out_buf[n] = '\0';
    return out_buf;
}

long long h_out_wait(const char *out, const char *needle, int timeout_ms) {
    long long t0 = h_now_ms();
    do {
        if (strstr(h_out_text(out), needle)) return h_now_ms() - t0;
        h_sleep_ms(2);
    } while (h_now_ms() - t0 < timeout_ms);
    return -1;
}

int h_out_count(const char *out, const char *needle) {
    int c = 0;
    for (const char *p = h_out_text(out); (p = strstr(p, needle)); p += strlen(needle)) c++;
    return c;
}

int h_out_wait_count(const char *out, const char *needle, int n, int timeout_ms) {
    long long t0 = h_now_ms();
    while (h_out_count(out, needle) < n && h_now_ms() - t0 < timeout_ms) h_sleep_ms(3);
    return h_out_count(out, needle);
}

int h_out_in_order(const char *out, const char *needles, size_t stride, int n) {
    const char *p = h_out_text(out);
    for (int i = 0; i < n; i++) {
        const char *needle = needles + (size_t)i * stride;
        const char *q = strstr(p, needle);
        if (!q) {
            fprintf(stderr, "    %s: not found in order: %s\n", out, needle);
            return 0;
        }
        p = q + strlen(needle);
    }
    return 1;
}

void h_out_nth_id(const char *out, int n, char *id) {
    const char *p = h_out_text(out);
    id[0] = '\0';
    for (int i = 0; i < n; i++) {
        p = strstr(p, "id: ");
        if (!p) return;
        p += 4;
    }
    size_t k = strcspn(p, "\n");
    if (k > 47) k = 47;
    memcpy(id, p, k);
    id[k] = '\0';
}

void h_reap(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

void h_out_leaders(const char *out, char *seen, size_t cap) {
    const char *buf = h_out_text(out);
    seen[0] = '\0';
    for (const char *p = buf; (p = strstr(p, "event: leader\ndata: ")); p++) {
        const char *v = strstr(p, "\"value\":\"");
        if (!v) break;
        v += 9;
        size_t n = strcspn(v, "\"");
        snprintf(seen + strlen(seen), cap - strlen(seen), "%s%.*s", seen[0] ? "," : "", (int)n, v);
    }
}
