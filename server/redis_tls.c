/* redis_tls.c -- see redis_tls.h.
 *
 * A link is a small state machine driven by its two descriptors' events on
 * the owner's loop (level-triggered):
 *
 *   CONNECTING  the TCP connect hiredis started; writability ends it
 *   HANDSHAKE   gnutls_handshake, waiting in the direction GnuTLS says;
 *               the chain and the name are checked inside it
 *               (gnutls_session_set_verify_cert)
 *   UP          copying: socketpair -> gnutls_record_send, and
 *               gnutls_record_recv -> socketpair
 *   DEAD        failed; the owner was told and frees it
 *
 * Each direction has one buffer of one TLS record's size.  A full buffer
 * stops reading its source (the descriptor is taken off the loop for that
 * direction), so a slow reader on one side holds up the other with no
 * unbounded memory.  GnuTLS wants a send that returned EAGAIN repeated
 * with the same bytes: they stay in the buffer until taken. */
#include "server/redis_tls.h"
#include "common/alloc.h"
#include "server/log.h"
#include "server/loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINK_BUF 16384 /* one TLS record's payload */

/* TLS 1.2 and 1.3 only, GnuTLS's default ciphers for them (as server/tls.c). */
static const char PRIORITIES[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

enum link_state { CONNECTING, HANDSHAKE, UP, DEAD };

struct redis_tls_link {
    struct loop *loop;            /* the owner's loop, whose thread runs the link */
    struct redis_tls_owner owner; /* told of up and failed */
    enum link_state state;        /* see above */
    gnutls_session_t s;           /* the TLS session on net */
    int net;                      /* the real socket to Redis */
    int app;                      /* our end of the socketpair; hiredis has the other */
    uint32_t net_ev, app_ev;      /* what each is registered for */
    int send_blocked;             /* gnutls_record_send said EAGAIN: wait for EPOLLOUT */
    int answered;                 /* Redis sent application data */
    char name[256];               /* the name verified (and sent as SNI) */
    char where[300];              /* "host:port", for the refusal kept for /readyz */
    char why[400];                /* the failure, once DEAD */
    size_t out_len;               /* bytes from hiredis not yet taken by GnuTLS */
    size_t in_off, in_len;        /* bytes from Redis not yet written to hiredis */
    unsigned char out[LINK_BUF];  /* hiredis -> Redis */
    unsigned char in[LINK_BUF];   /* Redis -> hiredis */
};

/* The credentials every link shares (set once, before the workers). */
static gnutls_certificate_credentials_t cred;
static gnutls_priority_t prio;
static int insecure;          /* --redis-tls-insecure */
static int have_client_cert;  /* --redis-tls-cert given */
static int have_ca;           /* --redis-tls-ca given (else the system's store) */
static char server_name[256]; /* --redis-tls-server-name, or "" */

/* The last refusal, for /readyz. */
static pthread_mutex_t refusal_lock = PTHREAD_MUTEX_INITIALIZER;
static char refusal[800];
static char refusal_where[300];

/* ------------------------------------------------------------------------
 * Settings
 * --------------------------------------------------------------------- */

static int any_tls(const struct gw_config *cfg) {
    for (int i = 0; i < cfg->nnodes; i++)
        if (cfg->nodes[i].tls) return 1;
    for (int i = 0; i < cfg->ncluster; i++)
        if (cfg->cluster[i].tls) return 1;
    for (int i = 0; i < cfg->nsentinels; i++)
        if (cfg->sentinels[i].tls) return 1;
    return cfg->nsentinels && cfg->sentinel_master_tls;
}

int redis_tls_init(const struct gw_config *cfg, char *err, size_t errlen) {
    if (!any_tls(cfg)) {
        if (cfg->redis_tls_ca[0] || cfg->redis_tls_cert[0] || cfg->redis_tls_insecure ||
            cfg->redis_tls_server_name[0])
            log_warn("redis: --redis-tls-* settings given, but no Redis URL is rediss:// "
                     "(they have no effect)");
        return 0;
    }
    int rc = gnutls_certificate_allocate_credentials(&cred);
    if (rc >= 0) rc = gnutls_priority_init(&prio, PRIORITIES, NULL);
    if (rc < 0) {
        snprintf(err, errlen, "TLS to Redis: %s", gnutls_strerror(rc));
        return -1;
    }
    insecure = cfg->redis_tls_insecure;
    snprintf(server_name, sizeof server_name, "%s", cfg->redis_tls_server_name);
    if (cfg->redis_tls_ca[0]) {
        rc = gnutls_certificate_set_x509_trust_file(cred, cfg->redis_tls_ca, GNUTLS_X509_FMT_PEM);
        if (rc <= 0) {
            snprintf(err, errlen, "--redis-tls-ca %s: %s", cfg->redis_tls_ca,
                     rc == 0 ? "no certificate in it" : gnutls_strerror(rc));
            return -1;
        }
        have_ca = 1;
    } else if (!insecure) {
        rc = gnutls_certificate_set_x509_system_trust(cred);
        if (rc <= 0)
            log_warn("redis: no --redis-tls-ca and no system trust store (%s): no Redis "
                     "certificate will be trusted",
                     rc == 0 ? "it is empty" : gnutls_strerror(rc));
    }
    if (cfg->redis_tls_cert[0] || cfg->redis_tls_key[0]) {
        if (!cfg->redis_tls_cert[0] || !cfg->redis_tls_key[0]) {
            snprintf(err, errlen, "--redis-tls-cert and --redis-tls-key go together");
            return -1;
        }
        /* The key's text never reaches the message: GnuTLS's reason only. */
        rc = gnutls_certificate_set_x509_key_file(cred, cfg->redis_tls_cert, cfg->redis_tls_key,
                                                  GNUTLS_X509_FMT_PEM);
        if (rc < 0) {
            snprintf(err, errlen, "--redis-tls-cert %s / --redis-tls-key %s: %s",
                     cfg->redis_tls_cert, cfg->redis_tls_key, gnutls_strerror(rc));
            return -1;
        }
        have_client_cert = 1;
    }
    if (insecure)
        log_warn("redis: --redis-tls-insecure: Redis's TLS certificate is NOT verified (neither "
                 "its chain nor its name); anyone on the path can read and change what the "
                 "gateway sends");
    else
        log_info("redis: TLS to Redis verifies the chain (%s) and the name (%s)",
                 have_ca ? cfg->redis_tls_ca : "the system's trust store",
                 server_name[0] ? server_name : "each host as connected to");
    return 0;
}

/* ------------------------------------------------------------------------
 * The refusal kept for /readyz
 * --------------------------------------------------------------------- */

/* Keeps k's refusal; whether it is news (another text than the one kept),
 * so that a refusal is logged once, not by every connection and attempt. */
static int refusal_set(const struct redis_tls_link *k) {
    char text[sizeof refusal];
    snprintf(text, sizeof text, "%s: %s", k->where, k->why);
    pthread_mutex_lock(&refusal_lock);
    int news = strcmp(text, refusal) != 0;
    memcpy(refusal, text, sizeof refusal);
    snprintf(refusal_where, sizeof refusal_where, "%s", k->where);
    pthread_mutex_unlock(&refusal_lock);
    return news;
}

static void refusal_clear(const struct redis_tls_link *k) {
    pthread_mutex_lock(&refusal_lock);
    if (strcmp(refusal_where, k->where) == 0) refusal[0] = refusal_where[0] = '\0';
    pthread_mutex_unlock(&refusal_lock);
}

int redis_tls_refusal(char *out, size_t cap) {
    pthread_mutex_lock(&refusal_lock);
    int have = refusal[0] != '\0';
    if (have) snprintf(out, cap, "%s", refusal);
    pthread_mutex_unlock(&refusal_lock);
    return have;
}

/* ------------------------------------------------------------------------
 * Failures: one sentence each, saying what to change
 * --------------------------------------------------------------------- */

static void why_verify(struct redis_tls_link *k) {
    unsigned st = gnutls_session_get_verify_cert_status(k->s);
    size_t n = (size_t)snprintf(k->why, sizeof k->why, "Redis's TLS certificate is refused:");
    const char *sep = " ";
#define ADD(...)                                                                                  \
    do {                                                                                          \
        if (n < sizeof k->why) n += (size_t)snprintf(k->why + n, sizeof k->why - n, __VA_ARGS__); \
        sep = "; ";                                                                               \
    } while (0)
    if (st & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
        ADD("%sit is not signed by a CA %s", sep,
            have_ca ? "in --redis-tls-ca" : "of the system's trust store (--redis-tls-ca)");
    if (st & GNUTLS_CERT_EXPIRED) ADD("%sit has expired", sep);
    if (st & GNUTLS_CERT_NOT_ACTIVATED) ADD("%sit is not valid yet", sep);
    if (st & GNUTLS_CERT_UNEXPECTED_OWNER)
        ADD("%sit is not issued for '%s' (--redis-tls-server-name names the host it is for)", sep,
            k->name);
    if (st & GNUTLS_CERT_REVOKED) ADD("%sit is revoked", sep);
    if (st & GNUTLS_CERT_INSECURE_ALGORITHM) ADD("%sit is signed with an insecure algorithm", sep);
    if (sep[0] == ' ') {
        gnutls_datum_t out = {0};
        if (gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &out, 0) == 0) {
            ADD(" %s", (const char *)out.data);
            gnutls_free(out.data);
        } else {
            ADD(" verification failed");
        }
    }
#undef ADD
}

static void why_gnutls(struct redis_tls_link *k, int rc, const char *during) {
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
        why_verify(k);
    } else if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        int alert = (int)gnutls_alert_get(k->s);
        const char *name = gnutls_alert_get_name((gnutls_alert_description_t)alert);
        int about_cert = alert == GNUTLS_A_CERTIFICATE_REQUIRED ||
                         alert == GNUTLS_A_BAD_CERTIFICATE || alert == GNUTLS_A_UNKNOWN_CA ||
                         alert == GNUTLS_A_HANDSHAKE_FAILURE ||
                         alert == GNUTLS_A_CERTIFICATE_UNKNOWN;
        snprintf(k->why, sizeof k->why, "Redis refused the TLS connection (alert: %s)%s",
                 name ? name : "unknown",
                 !about_cert ? ""
                 : have_client_cert
                     ? ": it does not accept the client certificate (--redis-tls-cert)"
                     : ": it asks for a client certificate (--redis-tls-cert and "
                       "--redis-tls-key)");
    } else if (rc == GNUTLS_E_PREMATURE_TERMINATION || rc == GNUTLS_E_PULL_ERROR ||
               rc == GNUTLS_E_PUSH_ERROR) {
        snprintf(k->why, sizeof k->why, "Redis closed the connection %s%s", during,
                 k->state == HANDSHAKE ? " (does that port serve TLS, and accept this client?)"
                 : k->answered         ? ""
                 : have_client_cert
                     ? " right after the handshake (does it accept the client certificate?)"
                     : " right after the handshake (does it ask for a client certificate? "
                       "--redis-tls-cert and --redis-tls-key)");
    } else {
        snprintf(k->why, sizeof k->why, "TLS failed %s: %s%s", during, gnutls_strerror(rc),
                 k->state == HANDSHAKE ? " (is that port a TLS port? rediss:// needs one)" : "");
    }
}

static void set_events(struct redis_tls_link *k, int fd, uint32_t *have, uint32_t want);

/* DEAD: off the loop, and the owner told (it frees the link later). */
static void fail(struct redis_tls_link *k) {
    int refused = !k->answered; /* never reached Redis: a refusal, kept for /readyz */
    k->state = DEAD;
    set_events(k, k->net, &k->net_ev, 0);
    set_events(k, k->app, &k->app_ev, 0);
    if (refused && refusal_set(k)) log_error("redis: TLS to %s refused: %s", k->where, k->why);
    k->owner.failed(k->owner.arg, k->why, refused);
}

/* ------------------------------------------------------------------------
 * Driving it
 * --------------------------------------------------------------------- */

static void on_net(void *arg, uint32_t events);
static void on_app(void *arg, uint32_t events);

static void set_events(struct redis_tls_link *k, int fd, uint32_t *have, uint32_t want) {
    if (*have == want) return;
    if (loop_fd(k->loop, fd, want, fd == k->net ? on_net : on_app, k) < 0 && want)
        log_error("redis: cannot watch a TLS link's socket %d: %s", fd, strerror(errno));
    *have = want;
}

/* The registrations the state and the buffers call for. */
static void rearm(struct redis_tls_link *k) {
    uint32_t net = 0, app = 0;
    if (k->state == CONNECTING) {
        net = EPOLLOUT;
    } else if (k->state == HANDSHAKE) {
        net = gnutls_record_get_direction(k->s) ? EPOLLOUT : EPOLLIN;
    } else if (k->state == UP) {
        if (k->in_off == k->in_len) net |= EPOLLIN; /* room for what Redis sends */
        if (k->send_blocked) net |= EPOLLOUT;
        if (k->out_len == 0) app |= EPOLLIN; /* room for what hiredis sends */
        if (k->in_off < k->in_len) app |= EPOLLOUT;
    }
    set_events(k, k->net, &k->net_ev, net);
    set_events(k, k->app, &k->app_ev, app);
}

static void handshake(struct redis_tls_link *k) {
    int rc = gnutls_handshake(k->s);
    if (rc == GNUTLS_E_SUCCESS) {
        k->state = UP;
        k->owner.up(k->owner.arg);
        return;
    }
    if (!gnutls_error_is_fatal(rc)) return; /* EAGAIN, or a warning alert: go on */
    why_gnutls(k, rc, "during the handshake");
    fail(k);
}

/* Copies both ways until neither side moves. */
static void copy(struct redis_tls_link *k) {
    for (int moved = 1; moved && k->state == UP;) {
        moved = 0;
        if (k->out_len == 0) { /* hiredis -> buffer */
            ssize_t n = read(k->app, k->out, sizeof k->out);
            if (n > 0) {
                k->out_len = (size_t)n;
                moved = 1;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                snprintf(k->why, sizeof k->why, "hiredis closed its end");
                fail(k);
                return;
            }
        }
        if (k->out_len) { /* buffer -> TLS */
            ssize_t n = gnutls_record_send(k->s, k->out, k->out_len);
            k->send_blocked = n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED;
            if (n > 0) {
                k->out_len -= (size_t)n;
                memmove(k->out, k->out + n, k->out_len);
                moved = 1;
            } else if (!k->send_blocked) {
                /* Before any answer, Redis closing is usually its refusal
                 * of us, sent as an alert after a TLS 1.3 handshake that
                 * looked done (no client certificate): read it. */
                ssize_t m = k->answered ? 0 : gnutls_record_recv(k->s, k->in, sizeof k->in);
                why_gnutls(k, m == GNUTLS_E_FATAL_ALERT_RECEIVED ? (int)m : (int)n,
                           "while sending");
                fail(k);
                return;
            }
        }
        if (k->in_off == k->in_len) { /* TLS -> buffer (GnuTLS may hold more already) */
            k->in_off = k->in_len = 0;
            ssize_t n = gnutls_record_recv(k->s, k->in, sizeof k->in);
            if (n > 0) {
                k->in_len = (size_t)n;
                moved = 1;
                if (!k->answered) refusal_clear(k);
                k->answered = 1;
            } else if (n == 0) {
                snprintf(k->why, sizeof k->why, "Redis closed the TLS connection");
                fail(k);
                return;
            } else if (gnutls_error_is_fatal((int)n)) {
                why_gnutls(k, (int)n, "while receiving");
                fail(k);
                return;
            }
        }
        if (k->in_off < k->in_len) { /* buffer -> hiredis */
            ssize_t n = write(k->app, k->in + k->in_off, k->in_len - k->in_off);
            if (n > 0) {
                k->in_off += (size_t)n;
                moved = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(k->why, sizeof k->why, "hiredis closed its end");
                fail(k);
                return;
            }
        }
    }
}

static void on_net(void *arg, uint32_t events) {
    struct redis_tls_link *k = arg;
    if (k->state == CONNECTING) {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(k->net, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) soerr = errno;
        if (soerr) {
            snprintf(k->why, sizeof k->why, "cannot connect: %s", strerror(soerr));
            k->answered = 1; /* not a TLS refusal: the plain log line says it */
            fail(k);
            return;
        }
        if (!(events & EPOLLOUT)) return;
        k->state = HANDSHAKE;
    }
    if (k->state == HANDSHAKE) handshake(k);
    if (k->state == UP) copy(k);
    if (k->state != DEAD) rearm(k);
}

static void on_app(void *arg, uint32_t events) {
    struct redis_tls_link *k = arg;
    (void)events;
    if (k->state == UP) copy(k);
    if (k->state != DEAD) rearm(k);
}

void redis_tls_flush(struct redis_tls_link *k) {
    if (k && k->state == UP) {
        copy(k);
        if (k->state != DEAD) rearm(k);
    }
}

int redis_tls_socket(const struct redis_tls_link *k) { return k->net; }

int redis_tls_expire(struct redis_tls_link *k, int ms, char *why, size_t cap) {
    if (k->state != HANDSHAKE) return 0;
    snprintf(k->why, sizeof k->why,
             "the TLS handshake timed out after %d ms (does that port serve TLS? a plain port "
             "given as rediss:// never answers)",
             ms);
    snprintf(why, cap, "%s", k->why);
    fail(k);
    return 1;
}

/* ------------------------------------------------------------------------
 * Making and freeing a link
 * --------------------------------------------------------------------- */

static int is_address(const char *s) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

struct redis_tls_link *redis_tls_wrap(struct loop *l, int fd, const char *host, int port,
                                      const struct redis_tls_owner *owner, char *err,
                                      size_t errlen) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return NULL;
    }
    int net = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    /* hiredis keeps its descriptor number; behind it is now the socketpair. */
    if (net < 0 || dup2(sp[0], fd) < 0) {
        snprintf(err, errlen, "dup: %s", strerror(errno));
        if (net >= 0) close(net);
        close(sp[0]);
        close(sp[1]);
        return NULL;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    close(sp[0]);

    struct redis_tls_link *k = alloc_check(calloc(1, sizeof *k));
    k->loop = l;
    k->owner = *owner;
    k->net = net;
    k->app = sp[1];
    snprintf(k->name, sizeof k->name, "%s", server_name[0] ? server_name : host);
    snprintf(k->where, sizeof k->where, "%s:%d", host, port);
    int rc = gnutls_init(&k->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
    if (rc >= 0) rc = gnutls_priority_set(k->s, prio);
    if (rc >= 0) rc = gnutls_credentials_set(k->s, GNUTLS_CRD_CERTIFICATE, cred);
    if (rc >= 0 && !is_address(k->name))
        rc = gnutls_server_name_set(k->s, GNUTLS_NAME_DNS, k->name, strlen(k->name));
    if (rc < 0) {
        snprintf(err, errlen, "TLS: %s", gnutls_strerror(rc));
        redis_tls_free(k);
        return NULL;
    }
    /* The chain and the name (an address: the IP SANs) are checked inside
     * the handshake, which fails with CERTIFICATE_VERIFICATION_ERROR. */
    if (!insecure) gnutls_session_set_verify_cert(k->s, k->name, 0);
    gnutls_transport_set_int(k->s, net);
    gnutls_handshake_set_timeout(k->s, 0); /* the owner's connect timeout rules */
    k->state = CONNECTING;
    rearm(k);
    return k;
}

void redis_tls_free(struct redis_tls_link *k) {
    if (!k) return;
    set_events(k, k->net, &k->net_ev, 0);
    set_events(k, k->app, &k->app_ev, 0);
    if (k->s) gnutls_deinit(k->s);
    close(k->net);
    close(k->app);
    explicit_bzero(k->out, sizeof k->out); /* may hold an AUTH's password */
    free(k);
}
