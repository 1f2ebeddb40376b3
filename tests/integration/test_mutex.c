/* test_mutex.c -- mutual exclusion under contention, end to end.
 *
 * 16 client threads × 60 rounds contend for ONE lock name through TWO
 * gateway processes sharing one Redis.  Inside the critical section each
 * does a deliberately non-atomic read-modify-write of a shared counter (read,
 * sleep, write), so any overlap of two holders loses an update.  At the end:
 * the counter equals the number of successful holds, no two holders were
 * ever inside at once, and the fences, taken in hold order, strictly
 * increase.  A control run without the lock shows the read-modify-write
 * does lose updates when unprotected, so the test has teeth. */
#include "tests/integration/harness.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define THREADS   16
#define ROUNDS    60
#define LOCK_PATH "/v1/locks/mutex-shared"

static struct h_redis redis;
static struct h_gw gws[2];

/* ============================================================================
 * The shared resource: a counter in this process, updated non-atomically
 * ========================================================================= */

static volatile long counter; /* the protected value */
static atomic_int inside;     /* holders inside the section now */
static atomic_int overlaps;   /* times a second holder came in */

/* Read, wait, write: any overlapping holder loses an update. */
static void read_modify_write(int sleep_us) {
    long v = counter;
    struct timespec ts = {0, (long)sleep_us * 1000};
    nanosleep(&ts, NULL);
    counter = v + 1;
}

/* ============================================================================
 * The run
 * ========================================================================= */

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static long long fences[THREADS * ROUNDS]; /* fence of the n-th hold, in hold order */
static int holds;                          /* holds recorded */
static atomic_int busy_answers, errors, bad_releases;

struct worker {
    int id;
    unsigned seed;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct h_client cl;
    h_client_init(&cl, 10000);
    for (int round = 0; round < ROUNDS; round++) {
        /* Acquire through one gateway, release through the other, and
         * swap every round: the gateways must not matter. */
        int acq_port = gws[(w->id + round) % 2].port;
        int rel_port = gws[(w->id + round + 1) % 2].port;
        char token[160] = "";
        long long fence = -1;
        for (int attempt = 0;; attempt++) {
            long st = h_client_do(&cl, "POST", acq_port, LOCK_PATH, NULL, "{\"ttl_ms\":10000}");
            if (st == 201) {
                snprintf(token, sizeof token, "%s", h_token(&cl.last));
                fence = h_jint(&cl.last, "fence");
                break;
            }
            if (st == 409) {
                atomic_fetch_add(&busy_answers, 1);
                w->seed = w->seed * 1103515245u + 12345u;
                struct timespec ts = {0, (long)(500 + (w->seed >> 8) % 2500) * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
            atomic_fetch_add(&errors, 1);
            fprintf(stderr, "  thread %d: acquire answered %ld: %s\n", w->id, st, cl.last.body);
            if (attempt > 20) goto out;
            h_sleep_ms(10);
        }

        /* Hold order, taken the moment the hold starts. */
        pthread_mutex_lock(&order_mu);
        fences[holds++] = fence;
        pthread_mutex_unlock(&order_mu);

        if (atomic_fetch_add(&inside, 1) != 0) atomic_fetch_add(&overlaps, 1);
        read_modify_write(300);
        atomic_fetch_sub(&inside, 1);

        long st = h_client_do(&cl, "DELETE", rel_port, LOCK_PATH, token, NULL);
        if (st != 200 || strstr(cl.last.body, "\"released\":true") == NULL) {
            atomic_fetch_add(&bad_releases, 1);
            fprintf(stderr, "  thread %d: release answered %ld: %s\n", w->id, st, cl.last.body);
        }
    }
out:
    h_client_free(&cl);
    return NULL;
}

static void test_mutual_exclusion(void) {
    pthread_t th[THREADS];
    struct worker ws[THREADS];
    long long t0 = h_now_ms();
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (struct worker){.id = i, .seed = 7919u * (unsigned)(i + 1)};
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    long long ms = h_now_ms() - t0;
    fprintf(stderr, "  %d holds, %d busy answers, %d errors in %.1f s\n", holds,
            atomic_load(&busy_answers), atomic_load(&errors), ms / 1000.0);

    CHECK_EQ_INT(holds, THREADS * ROUNDS);
    CHECK_EQ_INT(counter, holds);            /* no lost update */
    CHECK_EQ_INT(atomic_load(&overlaps), 0); /* never two inside */
    CHECK_EQ_INT(atomic_load(&errors), 0);
    CHECK_EQ_INT(atomic_load(&bad_releases), 0);
    CHECK(atomic_load(&busy_answers) > 0); /* there was contention */
    int increasing = 1;
    for (int i = 1; i < holds; i++)
        if (fences[i] <= fences[i - 1]) {
            if (increasing)
                fprintf(stderr, "  hold %d has fence %lld after %lld\n", i, fences[i],
                        fences[i - 1]);
            increasing = 0;
        }
    CHECK(increasing);
    CHECK(holds == 0 || fences[0] > 0);
    CHECK(ms < 60000);

    /* Everyone released: the lock is free. */
    struct h_resp r = h_http("GET", gws[0].port, LOCK_PATH, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
}

/* The same read-modify-write without the lock loses updates: proof that
 * the check above would see an overlap. */
static volatile long unguarded;
static void *unguarded_main(void *arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) {
        long v = unguarded;
        struct timespec ts = {0, 300 * 1000};
        nanosleep(&ts, NULL);
        unguarded = v + 1;
    }
    return NULL;
}

static void test_control_race_is_visible(void) {
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, unguarded_main, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    fprintf(stderr, "  unguarded: %ld of %d increments survived\n", unguarded, THREADS * 20);
    CHECK(unguarded < THREADS * 20);
}

/* Both gateways stop cleanly (under ASan: without leaks). */
static void test_clean_stop(void) {
    CHECK_EQ_INT(h_gw_stop(&gws[0], 6000), 0);
    CHECK_EQ_INT(h_gw_stop(&gws[1], 6000), 0);
}

int main(void) {
    /* A free port may be taken by another test's process before the
     * server binds it: up to three tries on fresh ports. */
    int up = 0;
    for (int i = 0; i < 3 && !up; i++) {
        memset(gws, 0, sizeof gws);
        up = h_redis_start(&redis, 0, NULL) == 0 && h_gw_start(&gws[0], &redis, NULL) == 0 &&
             h_gw_start(&gws[1], &redis, NULL) == 0;
        if (!up) {
            h_gw_kill(&gws[0]);
            h_gw_kill(&gws[1]);
            h_redis_stop(&redis);
        }
    }
    if (!up) return 2;
    RUN(test_control_race_is_visible);
    RUN(test_mutual_exclusion);
    RUN(test_clean_stop);
    h_redis_stop(&redis);
    return check_summary("mutex");
}
