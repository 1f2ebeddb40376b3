/* main.c -- flags, signals, start and stop.
 *
 * `lockgate keygen ...` makes an API key instead (keygen.h).  SIGHUP
 * rereads the auth file, the TLS certificate and key, and the Redis
 * password file.
 *
 * Start: settings, scripts, then the workers (worker.h).  Stop on SIGTERM
 * or SIGINT: (SIGTERM only) /readyz fails and everything is still served
 * for --shutdown-delay-ms; then stop accepting, answer waiting requests
 * 503, let requests in flight finish (up to 4 s; what Redis still owes
 * then is answered 503), then close Redis; exit 0. */
#include "handlers/handlers.h"
#include "handlers/wiring.h"
#include "server/config.h"
#include "server/auth.h"
#include "server/http.h"
#include "server/keygen.h"
#include "server/metrics.h"
#include "server/tls.h"
#include "server/redis_tls.h"
#include "server/layout.h"
#include "server/liveness.h"
#include "server/log.h"
#include "server/lossguard.h"
#include "server/memguard.h"
#include "server/scripts.h"
#include "server/secret.h"
#include "server/worker.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SIGTERM's first part: /readyz fails at once, while everything, waits
 * included, is still served for --shutdown-delay-ms, so that load
 * balancers (their /readyz checks, Kubernetes' endpoints) stop sending
 * here before the stop refuses anything.  SIGHUP still rereads; a second
 * SIGTERM or a SIGINT cuts it short. */
static void serve_while_leaving(const sigset_t *signals, const struct gw_config *cfg) {
    http_leave();
    log_info("SIGTERM received: /readyz fails from now; serving %d ms more before stopping",
             cfg->shutdown_delay_ms);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += cfg->shutdown_delay_ms / 1000;
    end.tv_nsec += (long)(cfg->shutdown_delay_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) end.tv_sec++, end.tv_nsec -= 1000000000L;
    for (;;) {
        struct timespec now, left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = end.tv_sec - now.tv_sec;
        left.tv_nsec = end.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) left.tv_sec--, left.tv_nsec += 1000000000L;
        if (left.tv_sec < 0) return;
        int sig = sigtimedwait(signals, NULL, &left);
        if (sig < 0 && errno == EAGAIN) return; /* the delay is over */
        if (sig == SIGHUP) {
            auth_reload();
            tls_reload();
            secret_reload();
        } else if (sig > 0) {
            log_info("%s received while leaving: stopping now",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
    }
}

int main(int argc, char **argv) {
    /* Answers of over 64 KiB (an id batch of 10,000 is 190 KiB) get pages
     * of their own, returned to the system when freed: held by clients
     * that do not read, they otherwise left the heap tens of MiB larger
     * after those clients went (bench/nonreading.py, #30).  A fixed
     * threshold also stops glibc raising it after the first such free. */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    if (argc > 1 && strcmp(argv[1], "keygen") == 0) return keygen_main(argc - 1, argv + 1);
    /* Signals are taken synchronously by this thread only, and blocked
     * before anything else is done: one that comes while the settings, the
     * auth file, TLS or the workers are still being set up stays pending
     * and is taken by sigwait below, so a SIGHUP during start-up rereads
     * (instead of killing the process) and a SIGTERM stops cleanly.  Every
     * thread started from here inherits the block. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    static struct gw_config cfg;
    char err[512];
    int rc = config_load(&cfg, argc, argv, err, sizeof err);
    if (rc == 1) return 0;
    if (rc == 0) { /* before anything logs: reading the auth file may */
        log_set_level(cfg.log_level);
        log_set_format(cfg.log_format);
    }
    if (rc < 0 || (cfg.auth_file[0] && auth_load(cfg.auth_file, err, sizeof err) < 0) ||
        tls_init(&cfg, err, sizeof err) < 0 || secret_init(&cfg, err, sizeof err) < 0 ||
        redis_tls_init(&cfg, err, sizeof err) < 0) {
        if (rc == 0 && cfg.log_format == LOG_JSON)
            log_error("lockgate: %s", err); /* every line of a JSON log is JSON */
        else
            fprintf(stderr, "lockgate: %s\n", err);
        return 2;
    }
    metrics_add_text(auth_metrics_text);

    /* A test hook: every script's key access checked, in every mode
     * (server/scripts.h, lua/keycheck.lua). */
    const char *keycheck = getenv("LOCKGATE_TEST_KEYCHECK");
    scripts_init(keycheck && strcmp(keycheck, "1") == 0);
    /* A test hook: a gateway of another key layout version on the same
     * Redis (server/layout.h; tests/integration/test_layout.c). */
    const char *layout = getenv("LOCKGATE_TEST_LAYOUT_VERSION");
    layout_init(layout && atoll(layout) > 0 ? atoll(layout) : LAYOUT_VERSION, cfg.ncluster > 0);
    handlers_init(&cfg);
    ids_init(&cfg);
    liveness_init(&cfg);
    memguard_init(cfg.accept_eviction_risk);
    lossguard_init(cfg.max_lease_ms,
                   cfg.ncluster      ? LOSSGUARD_PER_MASTER
                   : cfg.nnodes >= 3 ? LOSSGUARD_QUORUM
                                     : LOSSGUARD_ALL,
                   cfg.nnodes, cfg.quorum);
    if (workers_start(&cfg) < 0) return 1;
    if (cfg.nsentinels)
        log_info("lockgate listening on %s:%d, Redis master '%s'%s from %d sentinel(s)%s, "
                 "key prefix '%s', %d workers",
                 cfg.listen_host, cfg.listen_port, cfg.sentinel_master,
                 cfg.sentinel_master_tls ? " (TLS)" : "", cfg.nsentinels,
                 cfg.sentinels[0].tls ? " (TLS)" : "", cfg.key_prefix, cfg.threads);
    else
        log_info("lockgate listening on %s:%d, Redis %s:%d%s, key prefix '%s', %d workers",
                 cfg.listen_host, cfg.listen_port, cfg.redis_host, cfg.redis_port,
                 cfg.nodes[0].tls ? " (TLS)" : "", cfg.key_prefix, cfg.threads);

    if (tls_enabled() || auth_enabled())
        log_info("lockgate: %s, %s", tls_enabled() ? "HTTPS (TLS 1.2+)" : "plain HTTP",
                 auth_enabled() ? "API keys required" : "no API keys");
    if (!auth_enabled() && !config_listen_is_loopback(&cfg))
        log_warn("lockgate: listening on %s with no access control: anyone who reaches the "
                 "port may take, release and read every lock; start with --auth-file FILE "
                 "(keys from `lockgate keygen`, docs/security.md)",
                 cfg.listen_host);

    int sig = 0;
    while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
        log_info("SIGHUP received: rereading the auth file, the TLS certificate and the Redis "
                 "password file");
        auth_reload();
        tls_reload();
        secret_reload();
    }
    if (sig == SIGTERM && cfg.shutdown_delay_ms > 0) serve_while_leaving(&stop_signals, &cfg);
    log_info("%s received: stopping (%ld requests in flight)",
             sig == SIGTERM ? "SIGTERM" : "SIGINT", http_in_flight());
    workers_stop();
    tls_stop();
    auth_stop();
    log_info("lockgate stopped");
    return 0;
}
