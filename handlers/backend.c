/* backend.c -- see backend.h: the pointer the choice fills (wiring.c) and
 * what the backends share (an HTTP thread waiting for an id block). */
#include "handlers/backend.h"
#include "handlers/verdict.h"
#include "idgen/idgen.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/worker.h"

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

const struct backend *backend;


/* ---- ids ----------------------------------------------------------------------------- */

/* A refusal repeats on every request until it clears (a second passes, or
 * the operator moves the epoch), so it is logged once every ten seconds. */
void backend_lease_refused(const struct id_ask *ask, int rc, long long a, long long b) {
    static _Atomic int64_t logged_ms;
    metrics_inc(M_ID_REFUSED, 1);
    int64_t now = loop_now_ms(), last = atomic_load(&logged_ms);
    if (now - last < 10000 && last != 0) return;
    if (!atomic_compare_exchange_strong(&logged_ms, &last, now)) return;
    if (rc == IDGEN_EPOCH_MISMATCH)
        log_error("ids: the mark %s was made with --id-epoch %lld, earlier than this gateway's "
                  "%s: refusing to lease (gateways sharing a Redis must use one epoch; when "
                  "moving it, move every gateway to the earlier one)",
                  ask->key, a, ask->epoch);
    else
        log_error("ids: Redis's mark %s lies at second %lld sequence %lld, at or below ids this "
                  "gateway already handed out (Redis lost its data?): refusing until a later "
                  "second",
                  ask->key, a, b);
}

/* id_lease.lua answers {second, first, last, jumped}, {-1, second, first}
 * (below the floor) or {-2, epoch, 0} (an earlier epoch's mark). */
int backend_parse_lease(const struct redis_result *res, const struct id_ask *ask,
                        struct idgen_block_lease *out) {
    const redisReply *r = res->reply;
    int ok = res->ok && r->type == REDIS_REPLY_ARRAY && (r->elements == 3 || r->elements == 4);
    for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!ok) return -1;
    long long a = r->element[0]->integer, b = r->element[1]->integer, c = r->element[2]->integer;
    if (a < 0) {
        int rc = a == -2 ? IDGEN_EPOCH_MISMATCH : IDGEN_BEHIND;
        backend_lease_refused(ask, rc, b, c);
        return rc;
    }
    if (r->elements == 4 && r->element[3]->integer) metrics_inc(M_ID_JUMPS, 1);
    if (r->elements == 4 && r->element[3]->integer == 2)
        log_warn("ids: the mark %s was written by another Redis (a restart or a failover): "
                 "leasing %d s ahead of it and of Redis's clock",
                 ask->key, ask->jump_s);
    out->second = (uint32_t)a;
    out->first = (uint32_t)b;
    out->last = (uint32_t)c;
    return 0;
}

void backend_lease_finish(struct lease_wait *lw, int rc) {
    pthread_mutex_lock(&lw->mu);
    lw->rc = rc;
    lw->done = 1;
    pthread_cond_signal(&lw->cond);
    pthread_mutex_unlock(&lw->mu);
}

/* With --min-replicas-ack the block is used only once that many replicas
 * have the mark: a failover to a replica that lacks it could lease the same
 * numbers again.  WAIT is sent after the script's answer, on the thread
 * and so the connection that ran it (in cluster mode the key's master). */
static void lease_acked(void *arg, const struct redis_result *res) {
    struct lease_wait *lw = arg;
    long long acked = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (acked < lw->ask->acks)
        log_warn("ids: only %lld of %d replicas acknowledged an id lease of %s in time: its "
                 "block is dropped unused",
                 acked < 0 ? 0 : acked, lw->ask->acks, lw->ask->key);
    backend_lease_finish(lw, acked >= lw->ask->acks ? 0 : -1);
}

static void lease_done(void *arg, const struct redis_result *res) {
    struct lease_wait *lw = arg;
    int rc = backend_parse_lease(res, lw->ask, lw->out);
    if (rc != 0 || lw->ask->acks == 0) {
        backend_lease_finish(lw, rc);
        return;
    }
    char n[16], timeout[16];
    snprintf(n, sizeof n, "%d", lw->ask->acks);
    snprintf(timeout, sizeof timeout, "%d", lw->ask->ack_timeout_ms);
    const char *argv[3] = {"WAIT", n, timeout};
    size_t lens[3] = {4, strlen(n), strlen(timeout)};
    redis_command_for(lw->ask->key, 3, argv, lens, lease_acked, lw);
}

void backend_lease_wait_for(struct lease_wait *lw) {
    pthread_mutex_lock(&lw->mu);
    while (!lw->done) pthread_cond_wait(&lw->cond, &lw->mu);
    pthread_mutex_unlock(&lw->mu);
}

/* The floor goes to the script as its second and sequence (Lua's doubles
 * hold neither 63-bit id whole), -1 when there is none. */
int backend_lease_one(const struct id_ask *ask, struct idgen_block_lease *out) {
    char count[16], fsec[16], fseq[16], jump[16];
    snprintf(count, sizeof count, "%u", ask->want);
    if (ask->floor) {
        snprintf(fsec, sizeof fsec, "%u", (unsigned)(ask->floor >> 32));
        snprintf(fseq, sizeof fseq, "%u", (unsigned)(ask->floor & 0xffffffffu));
    } else {
        strcpy(fsec, "-1");
        strcpy(fseq, "-1");
    }
    snprintf(jump, sizeof jump, "%d", ask->jump_s);
    const char *argv[] = {ask->key, ask->era, ask->epoch, count,
                          fsec,     fseq,     jump,       ask->floor_soft ? "1" : "0"};
    size_t lens[8];
    for (int i = 0; i < 8; i++) lens[i] = strlen(argv[i]);
    struct lease_wait lw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, out, ask};
    redis_eval_on(workers_aux_redis(), SCRIPT_ID_LEASE, 2, 8, argv, lens, lease_done, &lw);
    backend_lease_wait_for(&lw);
    return lw.rc;
}
