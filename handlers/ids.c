/* ids.c -- /v1/ids/{namespace}: unique 64-bit ids from blocks leased out
 * of Redis (idgen/ does the hand-out; this file wires it to HTTP and Redis).
 *
 * Namespaces live in idgen/idtable.c: at most --id-namespaces at once, idle
 * ones evicted; a request on a live one takes no lock.  Leasing a block is
 * the one place an HTTP thread waits on Redis (idgen's slow path, about once
 * per block). */
#include "handlers/backend.h"
#include "handlers/guard.h"
#include "handlers/handlers.h"
#include "common/alloc.h"
#include "common/decimal.h"
#include "idgen/idgen.h"
#include "idgen/idtable.h"
#include "server/body.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/offload.h"
#include "server/worker.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct idtable table; /* the live namespaces, bounded (--id-namespaces) */
static char epoch_arg[24];

/* idgen's lease callback.  The Redis layer calls back within its command
 * timeout whatever happens, so this wait is bounded.  The call is made on
 * the auxiliary loop's connections (worker.h): a worker cannot wait for
 * an answer that its own loop would have to read.  Leases are rare (a
 * block grows to a million ids), so the worker's wait is too. */
static int lease_block(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                       struct idgen_block_lease *out) {
    const struct gw_config *cfg = handlers_config();
    char key[GW_PREFIX_MAX + NAME_MAX_LEN + 8], base[GW_PREFIX_MAX + 8], era[GW_PREFIX_MAX + 32];
    snprintf(key, sizeof key, "%sid:{%s}", cfg->key_prefix, ns);
    snprintf(base, sizeof base, "%sid:era", cfg->key_prefix);
    redis_key_in_slot_of(era, sizeof era, base, key);
    struct id_ask ask = {.key = key,
                         .era = era,
                         .epoch = epoch_arg,
                         .want = want,
                         .floor = floor,
                         .floor_soft = soft,
                         .jump_s = cfg->id_jump_s,
                         .acks = cfg->min_replicas_ack,
                         .ack_timeout_ms = cfg->replica_ack_timeout_ms};
    int rc = backend->id_lease(&ask, out);
    if (rc == 0) metrics_inc(M_ID_BLOCKS, 1);
    return rc;
}

static int64_t now_ms(void *ctx) { return loop_now_ms(); }

static const struct idgen_ops ops = {.now_ms = now_ms, .lease = lease_block, .ctx = NULL};

static uint64_t namespaces_live(void) { return atomic_load(&table.live); }
static uint64_t namespaces_evicted(void) { return atomic_load(&table.evictions); }

int ids_init(const struct gw_config *cfg) {
    snprintf(epoch_arg, sizeof epoch_arg, "%lld", (long long)cfg->id_epoch);
    size_t max = cfg->id_namespaces ? (size_t)cfg->id_namespaces : IDTABLE_DEFAULT_MAX;
    if (idtable_init(&table, max, &ops, IDGEN_DEFAULT_MAX_AGE_MS) != 0) return -1;
    metrics_add_source("lockgate_id_namespaces", "Id namespaces live in this gateway", "gauge",
                       namespaces_live);
    metrics_add_source("lockgate_id_namespaces_evicted_total",
                       "Idle id namespaces evicted to make room", "counter", namespaces_evicted);
    return 0;
}

/* ---- handlers -------------------------------------------------------------------- */

/* Chosen before the handler from the route's types and Accept (accept.h). */
static int wants_text(struct gw_request *req) {
    return req->media && strcmp(req->media, "text/plain") == 0;
}

/* ---- a lease made off the worker's loop ----------------------------------------- */

struct lease_job {
    struct offload_job job;  /* first */
    struct gw_request *req;  /* waits, suspended, for the answer */
    struct idtable_entry *e; /* its namespace, held until the lease is done */
    long long count;         /* ids asked for */
    uint64_t *ids;           /* room for them */
    int rc;                  /* idgen_next's answer */
};

static void ids_answer(struct gw_request *req, const uint64_t *ids, long long count, int rc);

static void lease_job_work(struct offload_job *job) {
    struct lease_job *j = (struct lease_job *)job;
    j->rc = idgen_next(&j->e->ns, (uint32_t)j->count, j->ids);
    idtable_release(j->e);
}

static void lease_job_done(struct offload_job *job) {
    struct lease_job *j = (struct lease_job *)job;
    ids_answer(j->req, j->ids, j->count, j->rc);
    free(j->ids);
    free(j);
}

static void lease_job_lost(struct offload_job *job) {
    struct lease_job *j = (struct lease_job *)job;
    free(j->ids);
    free(j);
}

void ids_next(struct gw_request *req) {
    long long count = 1;
    const char *q = http_query(req, "count");
    if (name_param_or_reply(req, 0) || body_parse_or_reply(req)) return;
    if (q && decimal_parse(q, strlen(q), 1, IDGEN_MAX_COUNT, &count) < 0) {
        reply_problem(req, CODE_INVALID_FIELD, "count must be an integer from 1 to %d",
                      IDGEN_MAX_COUNT);
        return;
    }
    if (guard_ids_or_reply(req)) return;
    struct idtable_entry *e = idtable_acquire(&table, req->name);
    if (!e) {
        reply_problem(req, CODE_TOO_MANY_NAMESPACES,
                      "all %zu id namespaces of this gateway are in use by requests in flight",
                      table.max);
        return;
    }
    uint64_t stack_ids[64];
    uint64_t *ids = count <= 64 ? stack_ids : alloc_check(malloc((size_t)count * sizeof *ids));
    int rc = idgen_try_next(&e->ns, (uint32_t)count, ids);
    if (rc == IDGEN_WOULD_LEASE) {
        /* The block is used up or stale: the lease waits for Redis, so it
         * is made off this worker's loop (offload.h), which goes on
         * serving its other connections meanwhile.  The namespace stays
         * held until then. */
        struct lease_job *j = alloc_check(calloc(1, sizeof *j));
        j->req = req;
        j->e = e;
        j->count = count;
        j->ids = ids != stack_ids ? ids : alloc_check(malloc((size_t)count * sizeof *ids));
        j->job.work = lease_job_work;
        j->job.done = lease_job_done;
        j->job.lost = lease_job_lost;
        offload_run(&j->job);
        return;
    }
    idtable_release(e);
    ids_answer(req, ids, count, rc);
    if (ids != stack_ids) free(ids);
}

/* The answer to POST /v1/ids/{namespace}: count ids, or 503 when rc < 0. */
static void ids_answer(struct gw_request *req, const uint64_t *ids, long long count, int rc) {
    if (rc == IDGEN_BEHIND) {
        reply_problem(req, CODE_IDS_BEHIND,
                      "Redis's mark for this namespace is below ids this gateway already handed "
                      "out (Redis lost data): refused until Redis's clock reaches a later second");
        return;
    }
    if (rc == IDGEN_EPOCH_MISMATCH) {
        reply_problem(req, CODE_ID_EPOCH_MISMATCH,
                      "this namespace's ids were made with an earlier --id-epoch than this "
                      "gateway's: gateways sharing a Redis must use one epoch");
        return;
    }
    if (rc < 0) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "cannot lease ids from Redis");
        return;
    }
    metrics_inc(M_IDS_ISSUED, (uint64_t)count);

    /* Built by hand: a 10000-id answer is 230 KB, and cJSON would build
     * 10000 nodes to print it. */
    int text = wants_text(req);
    size_t cap = (size_t)count * (IDGEN_DEC_MAX + 3) + NAME_MAX_LEN + 48, len = 0;
    char *out = alloc_check(malloc(cap));
    if (!text) len += (size_t)sprintf(out, "{\"namespace\":\"%s\",\"ids\":[", req->name);
    for (long long i = 0; i < count; i++) {
        if (!text) {
            if (i) out[len++] = ',';
            out[len++] = '"';
        }
        len += idgen_format(ids[i], out + len);
        out[len++] = text ? '\n' : '"';
    }
    if (!text) {
        memcpy(out + len, "]}", 2);
        len += 2;
    }
    reply_header(req, "Cache-Control", "no-store");
    reply_raw(req, 200, text ? "text/plain; charset=utf-8" : "application/json", out, len);
}

void ids_decode(struct gw_request *req) {
    if (name_param_or_reply(req, 0)) return;
    uint64_t id;
    struct idgen_decoded d;
    char time[IDGEN_TIME_MAX], digits[IDGEN_DEC_MAX];
    if (idgen_parse_decimal(req->match.param[1], req->match.param_len[1], &id) < 0 ||
        idgen_unpack(id, handlers_config()->id_epoch, &d) < 0 ||
        idgen_format_time(d.unix_seconds, time) < 0) {
        reply_problem(req, CODE_INVALID_ID, "an id is a positive decimal 64-bit integer");
        return;
    }
    idgen_format(id, digits);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", digits);
    json_add_int(o, "unix_seconds", d.unix_seconds);
    cJSON_AddStringToObject(o, "time", time);
    json_add_int(o, "sequence", d.seq);
    reply_json(req, 200, o);
}
