/* test_ids.c -- /v1/ids (openapi.yaml: nextIds, decodeId) against the real binary and a real
 * redis-server: the response shape and the id layout, --id-epoch, uniqueness
 * across gateways whose clocks are a day behind and an hour ahead (faketime)
 * while one gateway and Redis restart, many threads on one gateway, Redis
 * down, the largest batch, and eviction of idle namespaces (--id-namespaces):
 * a namespace evicted and used again, many namespaces interleaved across two
 * gateways, and 100,000 namespaces through one gateway. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#define EPOCH_2024 1704067200LL /* the default --id-epoch, 2024-01-01T00:00:00Z */
#define EPOCH_2025 1735689600LL /* 2025-01-01T00:00:00Z */
#define SLACK_S    3            /* "within a few seconds" of Redis's clock */

static struct h_redis redis;
static struct h_gw gw;

/* ---- helpers ---------------------------------------------------------------- */

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long wall_s(void) { return (long long)time(NULL); }

/* A decimal id as the API spells it: 1..19 digits, no sign, no leading zero,
 * 1..INT64_MAX.  Returns 0, or -1 when s is anything else. */
static int parse_id(const char *s, size_t len, uint64_t *out) {
    if (!s || len == 0 || len > 19 || s[0] == '0') return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v == 0 || v > (uint64_t)INT64_MAX) return -1;
    *out = v;
    return 0;
}

static long long id_unix(uint64_t id, long long epoch) { return epoch + (long long)(id >> 32); }
static uint32_t id_seq(uint64_t id) { return (uint32_t)(id & 0xffffffffu); }

/* The ids of a 200 answer, JSON ({"namespace": ns, "ids": [...]}) or
 * text/plain (one per line), into out[0..cap).  Returns how many, or -1 when
 * the body is not of that shape, an id is malformed, or they do not
 * strictly increase. */
static int ids_of(struct h_resp *r, const char *ns, uint64_t *out, int cap) {
    int n = 0;
    if (cJSON_IsObject(r->json)) {
        cJSON *nsv = cJSON_GetObjectItemCaseSensitive(r->json, "namespace");
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(r->json, "ids");
        if (!cJSON_IsString(nsv) || (ns && strcmp(nsv->valuestring, ns) != 0) ||
            !cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > cap)
            return -1;
        cJSON *v;
        cJSON_ArrayForEach(v, arr) {
            if (!cJSON_IsString(v) || parse_id(v->valuestring, strlen(v->valuestring), &out[n]) < 0)
                return -1;
            n++;
        }
    } else {
        const char *p = r->body, *end = r->body + r->body_len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl || n >= cap || parse_id(p, (size_t)(nl - p), &out[n]) < 0) return -1;
            n++;
            p = nl + 1;
        }
    }
    for (int i = 1; i < n; i++)
        if (out[i] <= out[i - 1]) return -1;
    return n;
}

/* Asks `port` for `count` ids of `ns` (count <= 0: no count parameter).
 * Returns how many came (the status is in *status), -1 on anything but a
 * well-formed 200. */
static int take_ids(int port, const char *method, const char *ns, int count, uint64_t *out, int cap,
                    long *status) {
    char path[300];
    if (count > 0)
        snprintf(path, sizeof path, "/v1/ids/%s?count=%d", ns, count);
    else
        snprintf(path, sizeof path, "/v1/ids/%s", ns);
    struct h_resp r = h_http(method, port, path, NULL, NULL, NULL);
    if (status) *status = r.status;
    int n = r.status == 200 ? ids_of(&r, ns, out, cap) : -1;
    h_resp_free(&r);
    return n;
}

static uint64_t one_id(int port, const char *ns) {
    uint64_t id = 0;
    long st;
    CHECK_EQ_INT(take_ids(port, "POST", ns, 1, &id, 1, &st), 1);
    CHECK_EQ_INT(st, 200);
    return id;
}

/* Redis's clock, unix seconds (TIME), or -1. */
static long long redis_time(struct h_redis *r) {
    const char *t = h_redis_cli(r, "TIME");
    return t ? atoll(t) : -1;
}

/* The HTTP Date header as unix seconds ("Sun, 22 Nov 2026 08:23:07 GMT"), or -1. */
static long long date_header(struct h_resp *r) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    const char *d = h_header(r, "Date");
    char mon[4];
    struct tm tm = {0};
    if (!d || sscanf(d, "%*3s, %d %3s %d %d:%d:%d GMT", &tm.tm_mday, mon, &tm.tm_year, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec) != 6)
        return -1;
    const char *m = strstr(months, mon);
    if (!m || (m - months) % 3) return -1;
    tm.tm_mon = (int)(m - months) / 3;
    tm.tm_year -= 1900;
    return (long long)timegm(&tm);
}

/* One answered request, for the ordering checks. */
struct rec {
    uint64_t lo, hi;          /* its first and last id */
    long long send_ns;        /* monotonic, just before sending */
    long long recv_ns;        /* monotonic, just after the answer */
    long long send_s, recv_s; /* wall clock (this process is not under faketime) */
    int thread;               /* which client thread */
    int gwi;                  /* which gateway (port) */
    int inst;                 /* which gateway process, -1 when unknown */
};

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_recv(const void *a, const void *b) {
    const struct rec *x = a, *y = b;
    return x->recv_ns < y->recv_ns ? -1 : x->recv_ns > y->recv_ns;
}

/* How many of ids[0..n) repeat an earlier one (sorts ids). */
static size_t duplicates(uint64_t *ids, size_t n) {
    qsort(ids, n, sizeof *ids, cmp_u64);
    size_t dup = 0;
    for (size_t i = 1; i < n; i++)
        if (ids[i] == ids[i - 1]) {
            if (dup < 5) fprintf(stderr, "  duplicate id %" PRIu64 "\n", ids[i]);
            dup++;
        }
    return dup;
}

/* Requests of one gateway process that started after another's answer had
 * arrived must get greater ids ("ids of a later call are greater").  recs is
 * sorted by recv_ns here.  Returns the number of violations. */
static size_t order_violations(struct rec *recs, size_t n) {
    if (n == 0) return 0;
    qsort(recs, n, sizeof *recs, cmp_recv);
    uint64_t *pmax = malloc(n * sizeof *pmax);
    for (size_t i = 0; i < n; i++)
        pmax[i] = i && pmax[i - 1] > recs[i].hi ? pmax[i - 1] : recs[i].hi;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = n; /* first index with recv_ns >= send_ns */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (recs[mid].recv_ns < recs[i].send_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && pmax[lo - 1] >= recs[i].lo) {
            if (bad < 5)
                fprintf(stderr,
                        "  request sent after an answer with id %" PRIu64 " got %" PRIu64 "\n",
                        pmax[lo - 1], recs[i].lo);
            bad++;
        }
    }
    free(pmax);
    return bad;
}

/* A growable array of recs and of all ids, one per client thread. */
struct log {
    struct rec *recs;
    size_t nrecs, caprecs;
    uint64_t *ids;
    size_t nids, capids;
};

static void log_add(struct log *l, const struct rec *r, const uint64_t *ids, int n) {
    if (l->nrecs == l->caprecs) {
        l->caprecs = l->caprecs ? l->caprecs * 2 : 1024;
        l->recs = realloc(l->recs, l->caprecs * sizeof *l->recs);
    }
    l->recs[l->nrecs++] = *r;
    if (l->nids + (size_t)n > l->capids) {
        l->capids = (l->capids ? l->capids * 2 : 16384) + (size_t)n;
        l->ids = realloc(l->ids, l->capids * sizeof *l->ids);
    }
    memcpy(l->ids + l->nids, ids, (size_t)n * sizeof *ids);
    l->nids += (size_t)n;
}

static void log_free(struct log *l) {
    free(l->recs);
    free(l->ids);
    memset(l, 0, sizeof *l);
}

/* All ids of all logs into one array (caller frees); *n set. */
static uint64_t *all_ids(struct log *logs, int nlogs, size_t *n) {
    size_t total = 0;
    for (int i = 0; i < nlogs; i++) total += logs[i].nids;
    uint64_t *all = malloc((total ? total : 1) * sizeof *all);
    *n = 0;
    for (int i = 0; i < nlogs; i++) {
        memcpy(all + *n, logs[i].ids, logs[i].nids * sizeof *all);
        *n += logs[i].nids;
    }
    return all;
}

/* Per thread, requests to one gateway (key: gwi, or inst when by_inst) got
 * strictly increasing ids.  Returns the number of violations. */
static size_t per_thread_violations(struct log *l, int nkeys, int by_inst) {
    uint64_t last[8] = {0};
    size_t bad = 0;
    for (size_t i = 0; i < l->nrecs; i++) {
        int k = by_inst ? l->recs[i].inst : l->recs[i].gwi;
        if (k < 0 || k >= nkeys) continue;
        if (l->recs[i].lo <= last[k]) {
            if (bad < 5)
                fprintf(stderr, "  thread %d, gateway %d: %" PRIu64 " after %" PRIu64 "\n",
                        l->recs[i].thread, k, l->recs[i].lo, last[k]);
            bad++;
        }
        last[k] = l->recs[i].hi;
    }
    return bad;
}

/* ---- 1. the API's shape ------------------------------------------------------- */

static void test_api_shape(void) {
    uint64_t ids[16], prev = 0;
    const char *methods[] = {"POST", "GET"};
    for (int m = 0; m < 2; m++) {
        struct h_resp r = h_http(methods[m], gw.port, "/v1/ids/ns?count=5", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/json");
        CHECK_EQ_STR(h_header(&r, "Cache-Control"), "no-store");
        CHECK_EQ_STR(h_jstr(&r, "namespace"), "ns");
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.json, "ids")) == 5);
        CHECK_EQ_INT(ids_of(&r, "ns", ids, 16), 5);
        CHECK(ids[0] > prev);
        prev = ids[4];
        h_resp_free(&r);
    }

    /* Accept: text/plain: the ids, one a line. */
    struct h_resp r =
        h_http("GET", gw.port, "/v1/ids/ns?count=5", NULL, NULL, "Accept: text/plain");
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_header(&r, "Content-Type") &&
          strncmp(h_header(&r, "Content-Type"), "text/plain", 10) == 0);
    CHECK_EQ_STR(h_header(&r, "Cache-Control"), "no-store");
    CHECK(!cJSON_IsObject(r.json) && r.body_len > 0 && r.body[0] != '{');
    CHECK_EQ_INT(ids_of(&r, NULL, ids, 16), 5);
    CHECK(ids[0] > prev);
    prev = ids[4];
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/ids/ns?count=3", NULL, NULL, "Accept: text/plain");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(ids_of(&r, NULL, ids, 16), 3);
    h_resp_free(&r);

    /* No count: one. */
    long st;
    CHECK_EQ_INT(take_ids(gw.port, "POST", "ns", 0, ids, 16, &st), 1);
    CHECK_EQ_INT(take_ids(gw.port, "GET", "ns", 0, ids, 16, &st), 1);

    static const char *bad_counts[] = {"0",   "10001", "-1",  "abc",
                                       "1.5", "",      "1e3", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++)
        for (int m = 0; m < 2; m++) {
            char path[96];
            snprintf(path, sizeof path, "/v1/ids/ns?count=%s", bad_counts[i]);
            r = h_http(methods[m], gw.port, path, NULL, NULL, NULL);
            CHECK_EQ_INT(r.status, 400);
            CHECK_EQ_STR(h_jcode(&r), "invalid_field");
            CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/problem+json");
            if (r.status != 400) fprintf(stderr, "  count=%s: %ld\n", bad_counts[i], r.status);
            h_resp_free(&r);
        }
    /* The largest count is 10000 (test_big_batch asks for it). */

    char longname[260] = "/v1/ids/";
    memset(longname + 8, 'n', 201);
    longname[209] = '\0';
    const char *bad_names[] = {"/v1/ids/bad%20name", "/v1/ids/%zz", "/v1/ids/caf%C3%A9",
                               "/v1/ids/a%2Fb", longname};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        r = h_http("POST", gw.port, bad_names[i], NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 400);
        CHECK_EQ_STR(h_jcode(&r), "invalid_name");
        h_resp_free(&r);
    }
    longname[208] = '\0'; /* 200 bytes: fine */
    r = h_http("POST", gw.port, longname, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

static void test_decode(void) {
    /* The first id of a namespace never used has sequence 0. */
    long long before = wall_s();
    uint64_t id = one_id(gw.port, "dec");
    long long after = wall_s();
    char path[128];
    snprintf(path, sizeof path, "/v1/ids/dec/%" PRIu64, id);
    struct h_resp r = h_http("GET", gw.port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/json");
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, id);
    CHECK_EQ_STR(h_jstr(&r, "id"), digits);
    long long secs = h_jint(&r, "unix_seconds");
    long long seq = h_jint(&r, "sequence");
    CHECK(secs >= before - SLACK_S && secs <= after + SLACK_S);
    CHECK_EQ_INT(seq, 0);
    /* The layout: bits 62..32 seconds since 2024-01-01, 31..0 the sequence. */
    CHECK_EQ_INT((long long)(id >> 32), secs - EPOCH_2024);
    CHECK_EQ_INT((long long)(id & 0xffffffffu), seq);
    CHECK((id >> 63) == 0);
    char want_time[32];
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(want_time, sizeof want_time, "%Y-%m-%dT%H:%M:%SZ", &tm);
    CHECK_EQ_STR(h_jstr(&r, "time"), want_time);
    h_resp_free(&r);

    /* Ids of one request: the same second's consecutive sequence numbers or
     * later seconds; the decoding agrees with the bits for each. */
    uint64_t ids[5];
    long st;
    CHECK_EQ_INT(take_ids(gw.port, "POST", "dec", 5, ids, 5, &st), 5);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "/v1/ids/dec/%" PRIu64, ids[i]);
        r = h_http("GET", gw.port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(h_jint(&r, "unix_seconds"), id_unix(ids[i], EPOCH_2024));
        CHECK_EQ_INT(h_jint(&r, "sequence"), id_seq(ids[i]));
        h_resp_free(&r);
    }

    /* Decoding is the layout only: any namespace decodes any id. */
    r = h_http("GET", gw.port, "/v1/ids/other/9223372036854775807", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "unix_seconds"), EPOCH_2024 + 2147483647LL);
    CHECK_EQ_STR(h_jstr(&r, "time"), "2092-01-19T03:14:07Z");
    CHECK_EQ_INT(h_jint(&r, "sequence"), 4294967295LL);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/ids/other/1", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "unix_seconds"), EPOCH_2024);
    CHECK_EQ_STR(h_jstr(&r, "time"), "2024-01-01T00:00:00Z");
    CHECK_EQ_INT(h_jint(&r, "sequence"), 1);
    h_resp_free(&r);

    static const char *bad[] = {"0",
                                "abc",
                                "-5",
                                "99999999999999999999",
                                "007",
                                "9223372036854775808",
                                "18446744073709551615",
                                "1.5",
                                "+5",
                                "%2012",
                                "12%20"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(path, sizeof path, "/v1/ids/dec/%s", bad[i]);
        r = h_http("GET", gw.port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 400);
        CHECK_EQ_STR(h_jcode(&r), "invalid_id");
        if (r.status != 400 || !h_jcode(&r) || strcmp(h_jcode(&r), "invalid_id"))
            fprintf(stderr, "  decode %s: %ld %s\n", bad[i], r.status, r.body);
        h_resp_free(&r);
    }
    r = h_http("GET", gw.port, "/v1/ids/bad%20name/12345", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_name");
    h_resp_free(&r);
}

/* A block is used at most about a second: after 1.2 s idle the next id comes
 * from a new lease, in a later second, whose sequence starts again at 0
 * (the rest of the old block is dropped, never handed out). */
static void test_freshness(void) {
    uint64_t a = one_id(gw.port, "fresh");
    uint64_t b = one_id(gw.port, "fresh");
    CHECK(b == a + 1 || b >> 32 > a >> 32); /* same block: the next number */
    h_sleep_ms(1200);
    /* In cluster mode the slot's id era may have begun with "a" (1 s
     * ahead, see settle_id_era): wait until Redis's clock is past b. */
    long long deadline = h_now_ms() + 5000;
    while (redis_time(&redis) <= id_unix(b, EPOCH_2024) && h_now_ms() < deadline) h_sleep_ms(20);
    uint64_t c = one_id(gw.port, "fresh");
    CHECK(c >> 32 > b >> 32);
    CHECK_EQ_INT(id_seq(c), 0);
}

/* ---- 2. --id-epoch ------------------------------------------------------------------ */

static void test_epoch_flag(void) {
    static const char *flags[] = {"--id-epoch 2025-01-01T00:00:00Z", "--id-epoch 1735689600"};
    for (int f = 0; f < 2; f++) {
        struct h_gw g2 = {0};
        if (h_gw_start(&g2, &redis, flags[f]) < 0) {
            CHECK(!"gateway with --id-epoch started");
            return;
        }
        const char *ns = f ? "epoch25b" : "epoch25";
        long long before = wall_s();
        uint64_t id = one_id(g2.port, ns);
        long long after = wall_s();
        /* Seconds count from 2025-01-01. */
        long long secs = (long long)(id >> 32) + EPOCH_2025;
        CHECK(secs >= before - SLACK_S && secs <= after + SLACK_S);
        char path[128];
        snprintf(path, sizeof path, "/v1/ids/%s/%" PRIu64, ns, id);
        struct h_resp r = h_http("GET", g2.port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(h_jint(&r, "unix_seconds"), secs);
        CHECK_EQ_INT(h_jint(&r, "unix_seconds") - EPOCH_2025, (long long)(id >> 32));
        h_resp_free(&r);
        /* The default gateway reads the same bits from 2024-01-01: a leap
         * year (366 days) earlier. */
        r = h_http("GET", gw.port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(h_jint(&r, "unix_seconds"), secs - 366LL * 86400);
        h_resp_free(&r);
        /* Id 1 is sequence 1 of the epoch's first second. */
        r = h_http("GET", g2.port, "/v1/ids/x/1", NULL, NULL, NULL);
        CHECK_EQ_STR(h_jstr(&r, "time"), "2025-01-01T00:00:00Z");
        h_resp_free(&r);
        CHECK_EQ_INT(h_gw_stop(&g2, 5000), 0);
    }
}

/* ---- 3. uniqueness across gateways, clocks and restarts ------------------------------- */

#define U_THREADS 12
#define U_GWS     3 /* 0 normal (restarted), 1 a day behind, 2 an hour ahead */
#define U_RUN_MS  8000

static struct {
    struct h_redis redis;
    struct h_gw gw[U_GWS];
    _Atomic int a_state;      /* gateway 0: 0 first process up, 1 restarting, 2 second up */
    _Atomic int a_window;     /* gateway 0 restarted a moment ago: 503s allowed there */
    _Atomic int redis_window; /* Redis restarting or just restarted: 503s allowed */
    _Atomic int stop;
    _Atomic long n503, n503_bad, nrefused, nother, nreq;
    struct log logs[U_THREADS];
} U;

static void *u_client(void *arg) {
    int t = (int)(intptr_t)arg;
    unsigned seed = 0x1d5u + (unsigned)t * 7919u;
    uint64_t ids[64];
    while (!atomic_load(&U.stop)) {
        int g = (int)(rand_r(&seed) % U_GWS);
        if (g == 0 && atomic_load(&U.a_state) == 1) g = 1 + (int)(rand_r(&seed) % 2);
        int n = 1 + (int)(rand_r(&seed) % 50);
        char path[64];
        snprintf(path, sizeof path, "/v1/ids/uniq?count=%d", n);
        int a_before = atomic_load(&U.a_state);
        int win_before = atomic_load(&U.redis_window) || (g == 0 && atomic_load(&U.a_window));
        struct rec rec = {.thread = t, .gwi = g, .send_ns = now_ns(), .send_s = wall_s()};
        struct h_resp r = h_http("POST", U.gw[g].port, path, NULL, NULL, NULL);
        rec.recv_ns = now_ns();
        rec.recv_s = wall_s();
        int a_after = atomic_load(&U.a_state);
        int win_after = atomic_load(&U.redis_window) || (g == 0 && atomic_load(&U.a_window));
        atomic_fetch_add(&U.nreq, 1);
        if (r.status == 200) {
            int got = ids_of(&r, "uniq", ids, 64);
            if (got != n) {
                if (atomic_fetch_add(&U.nother, 1) < 5)
                    fprintf(stderr, "  bad 200 answer: %s\n", r.body);
            } else {
                rec.lo = ids[0];
                rec.hi = ids[n - 1];
                rec.inst = g == 0 ? (a_before == 0 && a_after == 0 ? 0
                                     : a_before == 2               ? 1
                                                                   : -1)
                                  : g + 1;
                log_add(&U.logs[t], &rec, ids, n);
            }
        } else if (r.status == 503 && h_jcode(&r) &&
                   strcmp(h_jcode(&r), "backend_unavailable") == 0) {
            atomic_fetch_add(&U.n503, 1);
            if (!win_before && !win_after && atomic_fetch_add(&U.n503_bad, 1) < 3)
                fprintf(stderr, "  503 outside a restart, gateway %d: %s\n", g, r.body);
        } else if (r.status == 0 && g == 0 && (a_before != 0 || a_after != 0)) {
            atomic_fetch_add(&U.nrefused, 1); /* gateway 0 was being restarted */
        } else if (atomic_fetch_add(&U.nother, 1) < 5) {
            fprintf(stderr, "  gateway %d answered %ld: %s\n", g, r.status, r.body ? r.body : "");
        }
        h_resp_free(&r);
    }
    return NULL;
}

/* Kills the faketime gateways' trees if the test leaves early. */
static void u_atexit(void) {
    for (int i = 1; i < U_GWS; i++) h_gw_kill_tree(&U.gw[i]);
}

static void print_log(const char *path) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "tail -n 20 '%s' >&2", path);
    if (system(cmd)) {}
}

static void test_unique_across_gateways_and_clocks(void) {
    static const char *faked[U_GWS] = {NULL, "-1d", "+1h"};
    static const long long skew_of[U_GWS] = {0, -86400, 3600};
    /* faketime works by LD_PRELOAD, which AddressSanitizer refuses to run
     * behind (make test SANITIZE=1) unless told not to check. */
    char clock_of[U_GWS][600] = {{0}};
    const char *asan = getenv("ASAN_OPTIONS");
    for (int i = 1; i < U_GWS; i++)
        snprintf(clock_of[i], sizeof clock_of[i],
                 "env 'ASAN_OPTIONS=%.400s%sverify_asan_link_order=0' faketime -f '%s'",
                 asan ? asan : "", asan && *asan ? ":" : "", faked[i]);
    memset(&U, 0, sizeof U);
    atexit(u_atexit);
    if (h_redis_start(&U.redis, 1, NULL) < 0) {
        CHECK(!"redis started");
        return;
    }
    for (int i = 0; i < U_GWS; i++) {
        if (h_gw_start_env(&U.gw[i], &U.redis, NULL, i ? clock_of[i] : NULL) < 0) {
            fprintf(stderr, "  gateway %d (%s) did not start; its log:\n", i,
                    i ? clock_of[i] : "no faketime");
            print_log(U.gw[i].log);
            CHECK(!"gateway started");
            return;
        }
    }
    /* faketime really moves the gateways' clocks (their HTTP Date header),
     * or this test would prove nothing about clocks. */
    for (int i = 0; i < U_GWS; i++) {
        struct h_resp r = h_http("GET", U.gw[i].port, "/healthz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        long long d = date_header(&r) - wall_s();
        if (d < skew_of[i] - 5 || d > skew_of[i] + 5)
            fprintf(stderr, "  gateway %d: clock off by %lld s, wanted %lld\n", i, d, skew_of[i]);
        CHECK(d >= skew_of[i] - 5 && d <= skew_of[i] + 5);
        h_resp_free(&r);
    }
    long long redis_off = redis_time(&U.redis) - wall_s(); /* 0 on one host, but measured */

    pthread_t th[U_THREADS];
    long long t0 = h_now_ms();
    for (int t = 0; t < U_THREADS; t++) pthread_create(&th[t], NULL, u_client, (void *)(intptr_t)t);

    /* At 2.5 s: restart gateway 0 on the same port. */
    h_sleep_ms(2500);
    atomic_store(&U.a_window, 1);
    atomic_store(&U.a_state, 1);
    CHECK_EQ_INT(h_gw_stop(&U.gw[0], 5000), 0);
    CHECK_EQ_INT(h_gw_start(&U.gw[0], &U.redis, NULL), 0);
    atomic_store(&U.a_state, 2);
    long long a_up = h_now_ms() - t0;
    h_sleep_ms(1000);
    atomic_store(&U.a_window, 0);

    /* At about 4.5 s: kill Redis and start it again from its AOF. */
    long long sleep_ms = 4500 - (h_now_ms() - t0);
    if (sleep_ms > 0) h_sleep_ms((int)sleep_ms);
    atomic_store(&U.redis_window, 1);
    long long r_down = h_now_ms() - t0;
    CHECK_EQ_INT(h_redis_restart(&U.redis, NULL), 0);
    long long r_up = h_now_ms() - t0;
    /* The gateways reconnect with a back-off of at most 1 s (server/redis.c):
     * 2.5 s after Redis answers again, 503s are no longer excused. */
    h_sleep_ms(2500);
    atomic_store(&U.redis_window, 0);

    sleep_ms = U_RUN_MS - (h_now_ms() - t0);
    if (sleep_ms > 0) h_sleep_ms((int)sleep_ms);
    atomic_store(&U.stop, 1);
    for (int t = 0; t < U_THREADS; t++) pthread_join(th[t], NULL);
    long long redis_end = redis_time(&U.redis);

    /* No id twice, in anything any gateway handed out. */
    size_t nids;
    uint64_t *all = all_ids(U.logs, U_THREADS, &nids);
    size_t dup = duplicates(all, nids);
    CHECK_EQ_INT(dup, 0);

    /* Per thread and gateway, strictly increasing (also across gateway 0's
     * restart: the new process's ids are greater); per gateway process, a
     * request sent after another's answer arrived gets greater ids. */
    size_t nrecs = 0, per_thread_bad = 0;
    for (int t = 0; t < U_THREADS; t++) {
        per_thread_bad += per_thread_violations(&U.logs[t], U_GWS, 0);
        nrecs += U.logs[t].nrecs;
    }
    CHECK_EQ_INT(per_thread_bad, 0);
    struct rec *by = malloc((nrecs ? nrecs : 1) * sizeof *by);
    size_t order_bad = 0, count_inst[4] = {0};
    uint64_t old_max = 0, new_min = UINT64_MAX;
    for (int inst = 0; inst < 4; inst++) {
        size_t k = 0;
        for (int t = 0; t < U_THREADS; t++)
            for (size_t i = 0; i < U.logs[t].nrecs; i++)
                if (U.logs[t].recs[i].inst == inst) by[k++] = U.logs[t].recs[i];
        count_inst[inst] = k;
        order_bad += order_violations(by, k);
        for (size_t i = 0; i < k; i++) {
            if (inst == 0 && by[i].hi > old_max) old_max = by[i].hi;
            if (inst == 1 && by[i].lo < new_min) new_min = by[i].lo;
        }
    }
    free(by);
    CHECK_EQ_INT(order_bad, 0);
    /* The restarted gateway's first id is above all its first process gave. */
    CHECK(count_inst[0] > 0 && count_inst[1] > 0);
    CHECK(new_min > old_max);

    /* Embedded seconds: Redis's clock, whatever the gateway's clock says. */
    size_t time_bad = 0;
    long long max_behind = 0, max_ahead = 0;
    for (int t = 0; t < U_THREADS; t++)
        for (size_t i = 0; i < U.logs[t].nrecs; i++) {
            struct rec *q = &U.logs[t].recs[i];
            long long lo_s = id_unix(q->lo, EPOCH_2024), hi_s = id_unix(q->hi, EPOCH_2024);
            long long behind = q->send_s + redis_off - lo_s, ahead = hi_s - (q->recv_s + redis_off);
            if (behind > max_behind) max_behind = behind;
            if (ahead > max_ahead) max_ahead = ahead;
            if (behind > SLACK_S || ahead > SLACK_S) {
                if (time_bad < 5)
                    fprintf(stderr, "  gateway %d: id second %lld, request at %lld..%lld\n", q->gwi,
                            lo_s, q->send_s, q->recv_s);
                time_bad++;
            }
        }
    CHECK_EQ_INT(time_bad, 0);
    CHECK(redis_end > 0 && nids > 0 &&
          (long long)id_unix(all[nids - 1], EPOCH_2024) <= redis_end + 1);

    long per_gw[U_GWS] = {0};
    for (int t = 0; t < U_THREADS; t++)
        for (size_t i = 0; i < U.logs[t].nrecs; i++) per_gw[U.logs[t].recs[i].gwi]++;
    fprintf(stderr,
            "  %ld requests, %zu answered with %zu ids (gateways: %ld normal, %ld at -1d, "
            "%ld at +1h; gateway 0 before/after restart %zu/%zu); 503 while Redis or a gateway "
            "restarted: %ld (outside: %ld); refused during gateway restart: %ld; other: %ld; "
            "gateway restarted by %lld ms, Redis down %lld..%lld ms; ids lag Redis's clock by "
            "at most %lld s, lead it by at most %lld s\n",
            atomic_load(&U.nreq), nrecs, nids, per_gw[0], per_gw[1], per_gw[2], count_inst[0],
            count_inst[1], atomic_load(&U.n503), atomic_load(&U.n503_bad), atomic_load(&U.nrefused),
            atomic_load(&U.nother), a_up, r_down, r_up, max_behind, max_ahead);
    CHECK_EQ_INT(atomic_load(&U.n503_bad), 0);
    CHECK_EQ_INT(atomic_load(&U.nother), 0);
    CHECK(nids > 10000);
    free(all);

    CHECK_EQ_INT(h_gw_stop(&U.gw[0], 5000), 0);
    for (int i = 1; i < U_GWS; i++) CHECK_EQ_INT(h_gw_stop_tree(&U.gw[i], 5000), 0);
    h_redis_stop(&U.redis);
    for (int t = 0; t < U_THREADS; t++) log_free(&U.logs[t]);
}

/* ---- 4. many threads on one gateway --------------------------------------------------- */

#define M_THREADS  16
#define M_REQUESTS 500

static struct {
    pthread_barrier_t go;
    struct log logs[M_THREADS];
    _Atomic long failed;
} M;

static void *m_client(void *arg) {
    int t = (int)(intptr_t)arg;
    unsigned seed = 0xabcu + (unsigned)t * 31u;
    uint64_t ids[16];
    pthread_barrier_wait(&M.go);
    for (int i = 0; i < M_REQUESTS; i++) {
        int n = 1 + (int)(rand_r(&seed) % 10);
        struct rec rec = {.thread = t, .send_ns = now_ns()};
        long st;
        int got = take_ids(gw.port, i % 2 ? "GET" : "POST", "many", n, ids, 16, &st);
        rec.recv_ns = now_ns();
        if (got != n) {
            if (atomic_fetch_add(&M.failed, 1) < 5) fprintf(stderr, "  answer %ld\n", st);
            continue;
        }
        rec.lo = ids[0];
        rec.hi = ids[n - 1];
        log_add(&M.logs[t], &rec, ids, n);
    }
    return NULL;
}

/* A counter of /metrics, or -1. */
static long long metric(const char *name) {
    struct h_resp r = h_http("GET", gw.port, "/metrics", NULL, NULL, NULL);
    long long v = -1;
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = r.body ? strstr(r.body, pat) : NULL;
    if (p) v = atoll(p + strlen(pat));
    h_resp_free(&r);
    return v;
}

static void test_many_threads_one_gateway(void) {
    memset(&M, 0, sizeof M);
    long long blocks0 = metric("lockgate_id_blocks_total");
    pthread_barrier_init(&M.go, NULL, M_THREADS);
    pthread_t th[M_THREADS];
    long long t0 = h_now_ms();
    for (int t = 0; t < M_THREADS; t++) pthread_create(&th[t], NULL, m_client, (void *)(intptr_t)t);
    for (int t = 0; t < M_THREADS; t++) pthread_join(th[t], NULL);
    long long took = h_now_ms() - t0;
    pthread_barrier_destroy(&M.go);
    long long blocks = metric("lockgate_id_blocks_total") - blocks0;
    CHECK_EQ_INT(atomic_load(&M.failed), 0);

    size_t nids, nrecs = 0, per_thread_bad = 0;
    uint64_t *all = all_ids(M.logs, M_THREADS, &nids);
    CHECK_EQ_INT(duplicates(all, nids), 0);
    for (int t = 0; t < M_THREADS; t++) {
        per_thread_bad += per_thread_violations(&M.logs[t], 1, 0);
        nrecs += M.logs[t].nrecs;
    }
    CHECK_EQ_INT(per_thread_bad, 0);
    CHECK_EQ_INT(nrecs, M_THREADS * M_REQUESTS);
    struct rec *recs = malloc((nrecs ? nrecs : 1) * sizeof *recs);
    size_t k = 0;
    for (int t = 0; t < M_THREADS; t++)
        for (size_t i = 0; i < M.logs[t].nrecs; i++) recs[k++] = M.logs[t].recs[i];
    CHECK_EQ_INT(order_violations(recs, k), 0);
    free(recs);
    /* Blocks, not a Redis round trip per id or per request. */
    CHECK(blocks > 0 && blocks * 10 < (long long)nrecs);
    fprintf(stderr, "  %zu requests, %zu ids in %lld ms, %lld blocks leased\n", nrecs, nids, took,
            blocks);
    free(all);
    for (int t = 0; t < M_THREADS; t++) log_free(&M.logs[t]);
}

/* ---- 5. Redis down ---------------------------------------------------------------------- */

static void test_redis_down(void) {
    uint64_t ids[16], max_before = 0;
    long st;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(take_ids(gw.port, "POST", "down", 2, ids, 16, &st), 2);
        if (ids[1] > max_before) max_before = ids[1];
    }
    h_redis_kill(&redis);
    long long t0 = h_now_ms();

    /* Within ~0.5 s: the block leased a moment ago may still serve. */
    int served = 0, refused = 0;
    while (h_now_ms() - t0 < 400) {
        int got = take_ids(gw.port, "POST", "down", 1, ids, 16, &st);
        if (got == 1) {
            CHECK(ids[0] > max_before);
            max_before = ids[0];
            served++;
        } else {
            CHECK_EQ_INT(st, 503);
            refused++;
        }
        h_sleep_ms(50);
    }

    /* From ~1.5 s: every block is stale, so 503 with Retry-After, at once. */
    long long wait = 1500 - (h_now_ms() - t0);
    if (wait > 0) h_sleep_ms((int)wait);
    static const char *paths[] = {"/v1/ids/down", "/v1/ids/down?count=1",
                                  "/v1/ids/down?count=10000", "/v1/ids/never-used-before"};
    double slowest = 0;
    for (int i = 0; i < 8; i++) {
        struct h_resp r = h_http(i % 2 ? "GET" : "POST", gw.port, paths[i % 4], NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 503);
        CHECK_EQ_STR(h_jcode(&r), "backend_unavailable");
        CHECK_EQ_STR(h_header(&r, "Retry-After"), "1");
        CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/problem+json");
        CHECK(r.seconds < 3.0);
        if (r.seconds > slowest) slowest = r.seconds;
        h_resp_free(&r);
        h_sleep_ms(100);
    }
    /* Decoding needs no Redis. */
    char path[96];
    snprintf(path, sizeof path, "/v1/ids/down/%" PRIu64, max_before);
    struct h_resp r = h_http("GET", gw.port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);

    /* Redis back (from its AOF): ids again, above all before.  The gateway
     * reconnects with a back-off of at most 1 s (server/redis.c), so ids
     * should come back within about that; waited for up to 10 s. */
    CHECK_EQ_INT(h_redis_restart(&redis, NULL), 0);
    long long t1 = h_now_ms();
    int got = -1;
    while (got != 5 && h_now_ms() - t1 < 10000) {
        got = take_ids(gw.port, "POST", "down", 5, ids, 16, &st);
        if (got != 5) {
            CHECK_EQ_INT(st, 503);
            h_sleep_ms(50);
        }
    }
    long long back_ms = h_now_ms() - t1;
    CHECK_EQ_INT(got, 5);
    CHECK(ids[0] > max_before);
    fprintf(stderr,
            "  Redis down: %d served from the fresh block and %d refused in the first "
            "0.4 s; slowest 503 %.3f s; ids again %lld ms after Redis restarted\n",
            served, refused, slowest, back_ms);
    CHECK(back_ms <= 2500);
}

/* ---- 6. the largest batch ------------------------------------------------------------------ */

static void test_big_batch(void) {
    uint64_t *ids = malloc(10001 * sizeof *ids);
    long st;
    uint64_t prev = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(take_ids(gw.port, i == 1 ? "GET" : "POST", "big", 10000, ids, 10001, &st),
                     10000);
        CHECK_EQ_INT(st, 200);
        CHECK(ids[0] > prev); /* ids_of checked they strictly increase */
        prev = ids[9999];
    }
    struct h_resp r =
        h_http("POST", gw.port, "/v1/ids/big?count=10000", NULL, NULL, "Accept: text/plain");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(ids_of(&r, NULL, ids, 10001), 10000);
    CHECK(ids[0] > prev);
    h_resp_free(&r);
    free(ids);
}

/* ---- 7. eviction of idle namespaces (--id-namespaces) --------------------------------------- */

/* The ids of the keep-alive client's last 200 answer for `ns`, into out.
 * Returns how many, -1 when it was not a well-formed 200 of increasing ids. */
static int client_ids(struct h_client *cl, int port, const char *ns, int count, uint64_t *out,
                      long *status) {
    char path[300];
    snprintf(path, sizeof path, "/v1/ids/%s?count=%d", ns, count);
    *status = h_client_do(cl, "POST", port, path, NULL, NULL);
    if (*status != 200) return -1;
    cJSON *o = cJSON_ParseWithLength(cl->last.body, cl->last.body_len);
    cJSON *nsv = cJSON_GetObjectItemCaseSensitive(o, "namespace");
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "ids");
    int n = -1;
    if (cJSON_IsString(nsv) && strcmp(nsv->valuestring, ns) == 0 && cJSON_IsArray(arr) &&
        cJSON_GetArraySize(arr) == count) {
        n = 0;
        cJSON *v;
        cJSON_ArrayForEach(v, arr) {
            if (!cJSON_IsString(v) ||
                parse_id(v->valuestring, strlen(v->valuestring), &out[n]) < 0 ||
                (n > 0 && out[n] <= out[n - 1])) {
                n = -1;
                break;
            }
            n++;
        }
    }
    cJSON_Delete(o);
    return n;
}

/* With room for 16 namespaces: one used, pushed out by 40 others, used
 * again, five times; its ids keep increasing (the next lease starts above
 * Redis's mark), and the gateway never holds more than 16. */
static void test_evict_and_return(void) {
    struct h_gw g;
    CHECK_EQ_INT(h_gw_up(&g, &redis, "--id-namespaces 16"), 0);
    struct h_client cl;
    h_client_init(&cl, 10000);
    uint64_t ids[4], last = 0;
    long st;
    char ns[64];
    long long evicted0 = h_metric(&g, "lockgate_id_namespaces_evicted_total");
    CHECK_EQ_INT(evicted0, 0);
    for (int round = 0; round < 5; round++) {
        CHECK_EQ_INT(client_ids(&cl, g.port, "comeback", 3, ids, &st), 3);
        CHECK_EQ_INT(st, 200);
        CHECK(ids[0] > last);
        last = ids[2];
        long long before = h_metric(&g, "lockgate_id_namespaces_evicted_total");
        for (int k = 0; k < 40; k++) {
            snprintf(ns, sizeof ns, "filler-%d-%d", round, k);
            CHECK_EQ_INT(client_ids(&cl, g.port, ns, 1, ids, &st), 1);
            CHECK_EQ_INT(st, 200);
        }
        CHECK(h_metric(&g, "lockgate_id_namespaces_evicted_total") >= before + 40 - 16);
        long long live = h_metric(&g, "lockgate_id_namespaces");
        CHECK(live > 0 && live <= 16);
    }
    /* Redis's mark is the one state that survives: it lies above every id. */
    const char *seq = h_redis_cli(&redis, "HGET lockgate:id:{comeback} seq");
    CHECK(seq && (uint64_t)atoll(seq) >= (uint32_t)last);
    h_client_free(&cl);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
}

/* 60 namespaces, each asked in turn through one gateway and then the other,
 * both with room for 16, so nearly every request finds its namespace
 * evicted.  No id of a namespace repeats; per gateway and namespace, ids
 * increase. */
#define IL_NS     60
#define IL_ROUNDS 12
static void test_interleaved_two_gateways(void) {
    struct h_gw g[2];
    CHECK_EQ_INT(h_gw_up(&g[0], &redis, "--id-namespaces 16"), 0);
    CHECK_EQ_INT(h_gw_up(&g[1], &redis, "--id-namespaces 16"), 0);
    struct h_client cl;
    h_client_init(&cl, 10000);
    static uint64_t got[IL_NS][IL_ROUNDS * 2 * 2];
    uint64_t last[IL_NS][2] = {{0}};
    int ngot[IL_NS] = {0}, bad = 0, down = 0;
    char ns[64];
    for (int round = 0; round < IL_ROUNDS; round++) {
        for (int k = 0; k < IL_NS; k++) {
            snprintf(ns, sizeof ns, "mix-%d", k);
            for (int j = 0; j < 2; j++) {
                int gi = (k + round + j) % 2;
                uint64_t ids[2];
                long st;
                if (client_ids(&cl, g[gi].port, ns, 2, ids, &st) != 2) {
                    bad++;
                    down += st == 503;
                    continue;
                }
                if (ids[0] <= last[k][gi]) bad++;
                last[k][gi] = ids[1];
                got[k][ngot[k]++] = ids[0];
                got[k][ngot[k]++] = ids[1];
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(down, 0);
    size_t dups = 0;
    for (int k = 0; k < IL_NS; k++) dups += duplicates(got[k], (size_t)ngot[k]);
    CHECK_EQ_INT(dups, 0);
    for (int i = 0; i < 2; i++) {
        long long ev = h_metric(&g[i], "lockgate_id_namespaces_evicted_total");
        CHECK(ev >= (IL_NS - 16) * IL_ROUNDS);
        CHECK(h_metric(&g[i], "lockgate_id_namespaces") <= 16);
    }
    h_client_free(&cl);
    for (int i = 0; i < 2; i++) CHECK_EQ_INT(h_gw_stop(&g[i], 5000), 0);
}

/* The one capacity limit left, and its honest error: Redis frozen, so every
 * new namespace's lease hangs and its request holds its namespace; with
 * room for 16 and 22 such requests in flight at once, the ones that find
 * all 16 held get 503 too_many_namespaces at once (not backend_unavailable),
 * the others 503 backend_unavailable when the Redis timeout ends (a late
 * one may take a namespace let go by an early failure, so those need not
 * be exactly 16).  Served again after. */
#define TM_CLIENTS 22
static struct h_gw tm_gw;
struct tm_arg {
    int id;        /* client number */
    long status;   /* answer's status */
    char code[40]; /* its problem code, or "" */
    double secs;   /* how long it took */
};

static void *tm_client(void *p) {
    struct tm_arg *a = p;
    char path[64];
    snprintf(path, sizeof path, "/v1/ids/frozen-%d", a->id);
    struct h_resp r = h_http("POST", tm_gw.port, path, NULL, NULL, NULL);
    a->status = r.status;
    a->secs = r.seconds;
    snprintf(a->code, sizeof a->code, "%s", h_jcode(&r) ? h_jcode(&r) : "");
    h_resp_free(&r);
    return NULL;
}

static void test_too_many_namespaces(void) {
    CHECK_EQ_INT(h_gw_up(&tm_gw, &redis, "--id-namespaces 16 --threads 24 --redis-timeout-ms 8000"),
                 0);
    kill(redis.pid, SIGSTOP);
    pthread_t th[TM_CLIENTS];
    struct tm_arg args[TM_CLIENTS];
    /* One at a time: a worker thread that accepted two connections at once
     * would serve the second only after the first's lease timed out. */
    for (int i = 0; i < TM_CLIENTS; i++) {
        args[i] = (struct tm_arg){.id = i};
        pthread_create(&th[i], NULL, tm_client, &args[i]);
        h_sleep_ms(100);
    }
    for (int i = 0; i < TM_CLIENTS; i++) pthread_join(th[i], NULL);
    kill(redis.pid, SIGCONT);
    int full = 0, unavailable = 0, other = 0;
    for (int i = 0; i < TM_CLIENTS; i++) {
        if (args[i].status == 503 && strcmp(args[i].code, "too_many_namespaces") == 0) {
            full++;
            CHECK(args[i].secs < 3.0); /* at once, not after the Redis timeout */
        } else if (args[i].status == 503 && strcmp(args[i].code, "backend_unavailable") == 0) {
            unavailable++;
        } else {
            other++;
            fprintf(stderr, "  client %d: %ld %s\n", i, args[i].status, args[i].code);
        }
    }
    fprintf(stderr, "  %d too_many_namespaces, %d backend_unavailable\n", full, unavailable);
    CHECK(full >= 1);
    CHECK_EQ_INT(other, 0);
    long st = 0;
    uint64_t id;
    for (int i = 0; i < 50 && st != 200; i++) { /* Redis back: a new namespace is served */
        if (take_ids(tm_gw.port, "POST", "thawed", 1, &id, 1, &st) != 1) h_sleep_ms(100);
    }
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(h_gw_stop(&tm_gw, 5000), 0);
}

/* 100,000 distinct namespaces through one gateway with room for 64 (the
 * old cap was 16,384 in a gateway's life): every answer is 200.  Each new
 * namespace waits for one lease from Redis on its HTTP thread, so the
 * gateway gets 8 threads and 4 clients keep them busy, each pipelining
 * HK_DEPTH requests on one plain keep-alive connection (curl would cost
 * more than the gateway). */
#define HK_THREADS 4
#define HK_TOTAL   100000
#define HK_DEPTH   32
static struct h_gw hk_gw;
struct hk_arg {
    int id;      /* thread number */
    int answers; /* responses read */
    int non200;  /* answers other than 200 */
    int unavail; /* of which 503 */
};

/* The end of the header block in buf[0..len), or NULL. */
static char *hk_head_end(char *buf, size_t len) {
    for (size_t i = 0; i + 4 <= len; i++)
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0) return buf + i;
    return NULL;
}

/* Reads HK_DEPTH-or-fewer (`want`) responses from fd, counting statuses. */
static int hk_read(int fd, int want, struct hk_arg *a) {
    static _Thread_local char buf[1 << 16];
    static _Thread_local size_t have;
    while (want > 0) {
        char *end = hk_head_end(buf, have);
        if (end) {
            size_t head = (size_t)(end + 4 - buf), body = 0;
            long st = strtol(buf + 9, NULL, 10);
            for (char *p = buf; p < end; p++)
                if (strncasecmp(p, "\nContent-Length:", 16) == 0) body = strtoul(p + 16, NULL, 10);
            if (have < head + body) goto more;
            a->answers++;
            if (st != 200) {
                if (a->non200++ < 3) fprintf(stderr, "  %.*s\n", (int)(head + body), buf);
                a->unavail += st == 503;
            }
            memmove(buf, buf + head + body, have - head - body);
            have -= head + body;
            want--;
            continue;
        }
    more:;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10000) <= 0) return -1;
        ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
        if (n <= 0) return -1;
        have += (size_t)n;
    }
    return 0;
}

static void *hk_client(void *p) {
    struct hk_arg *a = p;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)hk_gw.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return NULL;
    }
    char req[HK_DEPTH * 128];
    for (int i = a->id; i < HK_TOTAL;) {
        size_t len = 0;
        int n = 0;
        for (; n < HK_DEPTH && i < HK_TOTAL; n++, i += HK_THREADS)
            len += (size_t)snprintf(req + len, sizeof req - len,
                                    "POST /v1/ids/tenant-%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Content-Length: 0\r\n\r\n",
                                    i);
        if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len || hk_read(fd, n, a) < 0) break;
    }
    close(fd);
    return NULL;
}

static void test_hundred_thousand_namespaces(void) {
    CHECK_EQ_INT(h_gw_up(&hk_gw, &redis, "--id-namespaces 64 --threads 8"), 0);
    long long t0 = h_now_ms();
    pthread_t th[HK_THREADS];
    struct hk_arg args[HK_THREADS];
    for (int i = 0; i < HK_THREADS; i++) {
        args[i] = (struct hk_arg){.id = i};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, hk_client, &args[i]), 0);
    }
    int answers = 0, non200 = 0, unavail = 0;
    for (int i = 0; i < HK_THREADS; i++) {
        pthread_join(th[i], NULL);
        answers += args[i].answers;
        non200 += args[i].non200;
        unavail += args[i].unavail;
    }
    CHECK_EQ_INT(answers, HK_TOTAL);
    CHECK_EQ_INT(non200, 0);
    CHECK_EQ_INT(unavail, 0);
    CHECK(h_metric(&hk_gw, "lockgate_id_namespaces_evicted_total") >= HK_TOTAL - 64);
    CHECK(h_metric(&hk_gw, "lockgate_id_namespaces") <= 64);
    fprintf(stderr, "  %d namespaces in %lld ms\n", HK_TOTAL, h_now_ms() - t0);
    CHECK_EQ_INT(h_gw_stop(&hk_gw, 5000), 0);
}

/* ---- 8. Redis's data lost, epochs mixed (#35) ---------------------------------------- */

/* A Redis without persistence restarted in the same second: its marks and
 * its era are gone.  The gateway that stayed up and one started after the
 * restart both hand out ids above every id handed out before: the new era
 * places leases --id-jump-s ahead, and nothing is issued twice. */
static void test_empty_restart_no_repeat(void) {
    struct h_redis r;
    struct h_gw a, b;
    CHECK_EQ_INT(h_redis_start(&r, 0, NULL), 0);
    CHECK_EQ_INT(h_gw_up(&a, &r, "--id-jump-s 3"), 0);
    uint64_t before[200];
    long st;
    /* This Redis's era begins, and its window ends: "lost" then leases at
     * Redis's clock, as a Redis long in use does. */
    long long start = redis_time(&r);
    CHECK_EQ_INT(take_ids(a.port, "POST", "warm", 1, before, 1, &st), 1);
    long long deadline = h_now_ms() + 10000;
    while (redis_time(&r) < start + 4 && h_now_ms() < deadline) h_sleep_ms(20);
    CHECK_EQ_INT(take_ids(a.port, "POST", "lost", 200, before, 200, &st), 200);
    h_redis_kill(&r);
    CHECK_EQ_INT(h_redis_restart(&r, NULL), 0);
    CHECK_EQ_INT(h_gw_up(&b, &r, "--id-jump-s 3"), 0);
    uint64_t after_a[50], after_b[50];
    deadline = h_now_ms() + 10000;
    int na = -1;
    while (na != 50 && h_now_ms() < deadline) { /* a's connection comes back */
        na = take_ids(a.port, "POST", "lost", 50, after_a, 50, &st);
        if (na != 50) h_sleep_ms(50);
    }
    CHECK_EQ_INT(na, 50);
    CHECK_EQ_INT(take_ids(b.port, "POST", "lost", 50, after_b, 50, &st), 50);
    CHECK(after_a[0] > before[199]);
    CHECK(after_b[0] > before[199]);
    CHECK(after_b[0] > after_a[49] || after_a[0] > after_b[49]); /* disjoint blocks */
    CHECK(id_unix(after_b[0], EPOCH_2024) - id_unix(before[199], EPOCH_2024) >= 2);
    CHECK_EQ_INT(h_metric(&b, "lockgate_id_jumps_total"), 1);
    h_gw_stop(&a, 5000);
    h_gw_stop(&b, 5000);
    h_redis_stop(&r);
}

/* The mark records its epoch: a gateway whose epoch is later than the
 * mark's is refused (503 id_epoch_mismatch, never a silent repeat); one
 * with an earlier epoch (README's recovery move) takes the mark over, its
 * ids above all before. */
static void test_epoch_in_mark(void) {
    struct h_gw early, late;
    CHECK_EQ_INT(h_gw_up(&late, &redis, "--id-epoch 2024-01-01T00:00:00Z"), 0);
    CHECK_EQ_INT(h_gw_up(&early, &redis, "--id-epoch 2023-12-31T23:00:00Z"), 0);
    uint64_t x = one_id(late.port, "epochs");
    uint64_t y = one_id(early.port, "epochs");
    CHECK(y > x);
    long st = 0;
    uint64_t z;
    /* late's block is dropped once stale; its next lease meets the mark */
    long long deadline = h_now_ms() + 5000;
    while (st != 503 && h_now_ms() < deadline) {
        take_ids(late.port, "POST", "epochs", 1, &z, 1, &st);
        if (st != 503) h_sleep_ms(100);
    }
    CHECK_EQ_INT(st, 503);
    struct h_resp r = h_http("POST", late.port, "/v1/ids/epochs", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 503);
    CHECK_EQ_STR(h_jcode(&r), "id_epoch_mismatch");
    h_resp_free(&r);
    h_gw_stop(&late, 5000);
    h_gw_stop(&early, 5000);
}

/* The first lease on a new Redis begins its id era, and for --id-jump-s
 * (1 s here) leases are placed ahead of Redis's clock (lua/id_lease.lua):
 * the suite's checks of the ids' time start once that window is over. */
static void settle_id_era(void) {
    struct h_client cl;
    h_client_init(&cl, 10000);
    uint64_t id;
    long st = 0;
    long long start = redis_time(&redis);
    CHECK_EQ_INT(client_ids(&cl, gw.port, "era-warm-up", 1, &id, &st), 1);
    h_client_free(&cl);
    long long deadline = h_now_ms() + 10000;
    while (redis_time(&redis) < start + 2 && h_now_ms() < deadline) h_sleep_ms(20);
}

int main(void) {
    long long t0 = h_now_ms();
    setenv("LOCKGATE_ID_JUMP_S", "1", 1); /* every gateway of the suite */
    if (h_redis_start(&redis, 1, NULL) < 0 || h_gw_start(&gw, &redis, NULL) < 0) return 2;
    settle_id_era();
    RUN(test_api_shape);
    RUN(test_decode);
    RUN(test_freshness);
    RUN(test_epoch_flag);
    RUN(test_big_batch);
    RUN(test_many_threads_one_gateway);
    RUN_NOT_CLUSTER(test_redis_down);
    RUN(test_unique_across_gateways_and_clocks);
    RUN(test_evict_and_return);
    RUN(test_interleaved_two_gateways);
    RUN(test_too_many_namespaces);
    RUN(test_hundred_thousand_namespaces);
    RUN_NOT_CLUSTER(test_empty_restart_no_repeat);
    RUN(test_epoch_in_mark);
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
    h_redis_stop(&redis);
    fprintf(stderr, "  ids suite: %lld ms\n", h_now_ms() - t0);
    return check_summary("ids");
}
