/* backend.c -- see backend.h: the pointer the choice fills (wiring.c) and
 * what the backends share (an HTTP thread waiting for an id block). */
#include "handlers/backend.h"
#include "handlers/verdict.h"
#include "idgen/idgen.h"
#include "server/worker.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

const struct backend *backend;


/* Reads id_lease.lua's {second, first, last}; returns 1 when it is one. */
int backend_parse_lease(const struct redis_result *res, struct idgen_block_lease *out) {
    const redisReply *r = res->reply;
    int ok = res->ok && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
    for (size_t i = 0; ok && i < 3; i++) ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (ok) {
        out->second = (uint32_t)r->element[0]->integer;
        out->first = (uint32_t)r->element[1]->integer;
        out->last = (uint32_t)r->element[2]->integer;
    }
    return ok;
}

void backend_lease_finish(struct lease_wait *lw, int ok) {
    pthread_mutex_lock(&lw->mu);
    lw->ok = ok;
    lw->done = 1;
    pthread_cond_signal(&lw->cond);
    pthread_mutex_unlock(&lw->mu);
}

static void lease_done(void *arg, const struct redis_result *res) {
    struct lease_wait *lw = arg;
    backend_lease_finish(lw, backend_parse_lease(res, lw->out));
}

void backend_lease_wait_for(struct lease_wait *lw) {
    pthread_mutex_lock(&lw->mu);
    while (!lw->done) pthread_cond_wait(&lw->cond, &lw->mu);
    pthread_mutex_unlock(&lw->mu);
}


int backend_lease_one(const char *key, const char *epoch, uint32_t want,
                      struct idgen_block_lease *out) {
    char count[16];
    snprintf(count, sizeof count, "%u", want);
    const char *argv[] = {key, epoch, count};
    size_t lens[3] = {strlen(key), strlen(epoch), strlen(count)};
    struct lease_wait lw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, out};
    redis_eval_on(workers_aux_redis(), SCRIPT_ID_LEASE, 1, 3, argv, lens, lease_done, &lw);
    backend_lease_wait_for(&lw);
    return lw.ok ? 0 : -1;
}
