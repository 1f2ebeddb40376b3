/* tls.c -- see tls.h.
 *
 * The certificate reaches GnuTLS through a retrieve callback
 * (MHD_OPTION_HTTPS_CERT_CALLBACK) rather than as PEM given once at start:
 * each handshake asks for the pair in force, so a reload is one pointer
 * swap.  GnuTLS keeps pointing at the pair a handshake fetched for as long
 * as the session lives, so each connection holds a reference on it (a
 * struct tls_conn in its socket context, found from the session through
 * libmicrohttpd's session pointer, which is the connection); a pair a
 * reload replaced is freed when its last connection closes.  (Kept until
 * the end, each SIGHUP grew the gateway by a pair: #30.)
 *
 * With --tls-client-ca, libmicrohttpd is given the CA as its trust list,
 * which makes it *ask* for a client certificate; it does not insist, and
 * does not check what it gets.  tls_client_verified checks it, for every
 * request, before anything else runs. */
#include "server/tls.h"
#include "common/alloc.h"
#include "server/log.h"
#include "server/metrics.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TLS_CHAIN_MAX 16

/* TLS 1.2 and 1.3 only, GnuTLS's default ciphers for them. */
static const char PRIORITIES[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

struct tls_pair {
    gnutls_pcert_st certs[TLS_CHAIN_MAX]; /* the chain, leaf first */
    unsigned ncerts;                      /* used entries of certs */
    gnutls_privkey_t key;                 /* the leaf's private key */
    unsigned refs;                        /* connections whose handshake took it
                                             (under pairs_lock) */
    struct tls_pair *older;               /* next in the list of pairs not yet freed */
};

/* A connection's socket context: the pair its handshake took, or NULL. */
struct tls_conn {
    struct tls_pair *pair;
};

static char cert_path[4096], key_path[4096];
static _Atomic(struct tls_pair *) pair; /* in force; NULL: TLS off; heads the list */
/* Guards refs and the list: taken once per handshake and per TLS
 * connection's close, and by a reload; never while GnuTLS works. */
static pthread_mutex_t pairs_lock = PTHREAD_MUTEX_INITIALIZER;
static char *client_ca_pem; /* --tls-client-ca, kept for libmicrohttpd */
static struct MHD_OptionItem options[4];

static int read_file(const char *path, gnutls_datum_t *out, char *err, size_t errlen) {
    int rc = gnutls_load_file(path, out);
    if (rc < 0) snprintf(err, errlen, "cannot read %.200s: %s", path, gnutls_strerror(rc));
    return rc < 0 ? -1 : 0;
}

static void free_pair(struct tls_pair *p) {
    for (unsigned i = 0; i < p->ncerts; i++) gnutls_pcert_deinit(&p->certs[i]);
    gnutls_privkey_deinit(p->key);
    free(p);
}

/* Loads a certificate chain and its key, and checks that they belong
 * together (GnuTLS refuses a key that does not match the leaf). */
static struct tls_pair *load_pair(char *err, size_t errlen) {
    gnutls_datum_t cert = {0}, key = {0};
    struct tls_pair *p = NULL;
    gnutls_certificate_credentials_t check = NULL;
    if (read_file(cert_path, &cert, err, errlen) < 0 || read_file(key_path, &key, err, errlen) < 0)
        goto out;
    if (gnutls_certificate_allocate_credentials(&check) < 0) abort();
    int rc = gnutls_certificate_set_x509_key_mem(check, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        snprintf(err, errlen, "certificate %.150s and key %.150s: %s", cert_path, key_path,
                 gnutls_strerror(rc));
        goto out;
    }
    p = alloc_check(calloc(1, sizeof *p));
    p->ncerts = TLS_CHAIN_MAX;
    rc = gnutls_pcert_list_import_x509_raw(p->certs, &p->ncerts, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) p->ncerts = 0;
    if (gnutls_privkey_init(&p->key) < 0) abort();
    if (rc >= 0) rc = gnutls_privkey_import_x509_raw(p->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        snprintf(err, errlen, "certificate %.150s and key %.150s: %s", cert_path, key_path,
                 gnutls_strerror(rc));
        free_pair(p);
        p = NULL;
    }
out:
    if (check) gnutls_certificate_free_credentials(check);
    gnutls_free(cert.data);
    gnutls_free(key.data);
    return p;
}

/* Drops one reference (under pairs_lock); a replaced pair with none left
 * is unlinked and freed. */
static void pair_release(struct tls_pair *p) {
    if (--p->refs > 0 || p == atomic_load(&pair)) return;
    for (struct tls_pair *q = atomic_load(&pair); q; q = q->older)
        if (q->older == p) {
            q->older = p->older;
            free_pair(p);
            return;
        }
}

static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                    const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *key) {
    /* libmicrohttpd sets the session's pointer to its connection. */
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    /* the socket context's first member is ours (tls.h) */
    struct tls_conn *tc = ci && ci->socket_context ? *(struct tls_conn **)ci->socket_context : NULL;
    pthread_mutex_lock(&pairs_lock);
    struct tls_pair *p = atomic_load(&pair);
    p->refs++; /* without a context, never given back: kept, as before #30 */
    if (tc) {
        if (tc->pair) pair_release(tc->pair); /* a second handshake on it */
        tc->pair = p;
    }
    pthread_mutex_unlock(&pairs_lock);
    *pcert = p->certs;
    *pcert_length = p->ncerts;
    *key = p->key;
    return 0;
}

static uint64_t pairs_gauge(void) { return tls_pairs_live(); }

int tls_init(const struct gw_config *cfg, char *err, size_t errlen) {
    int n = 0;
    if (!cfg->tls_cert[0] && !cfg->tls_key[0] && !cfg->tls_client_ca[0]) {
        options[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        return 0;
    }
    if (!cfg->tls_cert[0] || !cfg->tls_key[0]) {
        snprintf(err, errlen, "TLS needs both --tls-cert and --tls-key");
        return -1;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES) {
        snprintf(err, errlen, "this libmicrohttpd has no TLS certificate callback");
        return -1;
    }
    snprintf(cert_path, sizeof cert_path, "%s", cfg->tls_cert);
    snprintf(key_path, sizeof key_path, "%s", cfg->tls_key);
    struct tls_pair *p = load_pair(err, errlen);
    if (!p) return -1;
    atomic_store(&pair, p);
    metrics_add_source("lockgate_tls_pairs",
                       "TLS certificate and key pairs in memory: the one in force and those "
                       "connections opened before a reload still use",
                       "gauge", pairs_gauge);
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)retrieve};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)PRIORITIES};
    if (cfg->tls_client_ca[0]) {
        gnutls_datum_t ca;
        if (read_file(cfg->tls_client_ca, &ca, err, errlen) < 0) return -1;
        gnutls_x509_crt_t *list;
        unsigned count = 0;
        int rc = gnutls_x509_crt_list_import2(&list, &count, &ca, GNUTLS_X509_FMT_PEM, 0);
        if (rc < 0 || count == 0) {
            snprintf(err, errlen, "client CA %.200s: %s", cfg->tls_client_ca,
                     rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
            gnutls_free(ca.data);
            return -1;
        }
        for (unsigned i = 0; i < count; i++) gnutls_x509_crt_deinit(list[i]);
        gnutls_free(list);
        client_ca_pem = alloc_copy(ca.data, ca.size);
        gnutls_free(ca.data);
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, client_ca_pem};
    }
    options[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return 0;
}

int tls_enabled(void) { return atomic_load(&pair) != NULL; }

unsigned tls_daemon_flags(void) { return tls_enabled() ? MHD_USE_TLS : 0; }

const struct MHD_OptionItem *tls_daemon_options(void) { return options; }

int tls_reload(void) {
    if (!tls_enabled()) return 0;
    char err[400];
    struct tls_pair *p = load_pair(err, sizeof err);
    if (!p) {
        log_error("tls: reload failed, the certificate in force stays: %s", err);
        return -1;
    }
    pthread_mutex_lock(&pairs_lock);
    struct tls_pair *old = atomic_load(&pair);
    p->older = old;
    atomic_store(&pair, p);
    old->refs++; /* and dropped: freed now when no connection uses it */
    pair_release(old);
    pthread_mutex_unlock(&pairs_lock);
    log_info("tls: reloaded certificate %s and key %s", cert_path, key_path);
    return 0;
}

void *tls_connection_started(void) {
    return tls_enabled() ? alloc_check(calloc(1, sizeof(struct tls_conn))) : NULL;
}

void tls_connection_closed(void *ctx) {
    struct tls_conn *tc = ctx;
    if (!tc) return;
    if (tc->pair) {
        pthread_mutex_lock(&pairs_lock);
        pair_release(tc->pair);
        pthread_mutex_unlock(&pairs_lock);
    }
    free(tc);
}

unsigned tls_pairs_live(void) {
    unsigned n = 0;
    pthread_mutex_lock(&pairs_lock);
    for (struct tls_pair *p = atomic_load(&pair); p; p = p->older) n++;
    pthread_mutex_unlock(&pairs_lock);
    return n;
}

void tls_stop(void) {
    struct tls_pair *p = atomic_exchange(&pair, NULL);
    while (p) {
        struct tls_pair *older = p->older;
        free_pair(p);
        p = older;
    }
    free(client_ca_pem);
    client_ca_pem = NULL;
}

int tls_client_verified(struct MHD_Connection *conn) {
    if (!client_ca_pem) return 1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session) return 0;
    unsigned status = 0;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    if (gnutls_certificate_type_get(s) != GNUTLS_CRT_X509) return 0;
    return gnutls_certificate_verify_peers2(s, &status) == 0 && status == 0;
}

int tls_write_past_mhd(struct MHD_Connection *conn, const void *data, size_t len) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session) return 0;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    return gnutls_record_send(s, data, len) == (ssize_t)len;
}
