/* offload.c -- see offload.h.  One queue under a mutex: jobs are rare. */
#include "server/offload.h"
#include "common/alloc.h"
#include "server/log.h"

#include <pthread.h>
#include <stdlib.h>

static struct {
    pthread_mutex_t mu;              /* guards the queue and stop */
    pthread_cond_t cond;             /* a job was queued, or stop */
    struct offload_job *head, *tail; /* queued jobs */
    int stop;                        /* offload_stop was called */
    pthread_t *threads;              /* the helpers */
    int n;                           /* how many */
} O = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void come_back(struct loop_task *t) {
    struct offload_job *j = (struct offload_job *)t;
    j->done(j);
}

static void *helper_main(void *unused) {
    for (;;) {
        pthread_mutex_lock(&O.mu);
        while (!O.head && !O.stop) pthread_cond_wait(&O.cond, &O.mu);
        struct offload_job *j = O.head;
        if (j) {
            O.head = j->next;
            if (!O.head) O.tail = NULL;
        }
        pthread_mutex_unlock(&O.mu);
        if (!j) return NULL; /* stopping, and the queue is empty */
        j->work(j);
        j->task.run = come_back;
        if (loop_post(j->home, &j->task) < 0) j->lost(j);
    }
}

int offload_start(int n) {
    O.threads = alloc_check(calloc((size_t)n, sizeof *O.threads));
    for (O.n = 0; O.n < n; O.n++) {
        if (pthread_create(&O.threads[O.n], NULL, helper_main, NULL) != 0) {
            log_error("offload: cannot start a helper thread");
            return -1;
        }
    }
    return 0;
}

void offload_run(struct offload_job *j) {
    j->home = loop_self();
    j->next = NULL;
    pthread_mutex_lock(&O.mu);
    if (O.tail)
        O.tail->next = j;
    else
        O.head = j;
    O.tail = j;
    pthread_cond_signal(&O.cond);
    pthread_mutex_unlock(&O.mu);
}

void offload_stop(void) {
    pthread_mutex_lock(&O.mu);
    O.stop = 1;
    pthread_cond_broadcast(&O.cond);
    pthread_mutex_unlock(&O.mu);
    for (int i = 0; i < O.n; i++) pthread_join(O.threads[i], NULL);
    free(O.threads);
    O.threads = NULL;
    O.n = 0;
    O.stop = 0;
}
