/* tls.h -- HTTPS for the gateway: libmicrohttpd with GnuTLS, TLS 1.2 or
 * newer, the certificate and key reloadable (SIGHUP) without a restart,
 * and mutual TLS checked by the gateway itself.
 *
 * The daemon start adds tls_daemon_flags() and MHD_OPTION_ARRAY,
 * tls_daemon_options(): this file owns every TLS option, so the daemon's
 * code needs no more than those two lines. */
#ifndef LOCKGATE_TLS_H
#define LOCKGATE_TLS_H

#include "server/config.h"

struct MHD_Connection;
struct MHD_OptionItem;

/* Loads the certificate, key and client CA cfg names (if any).  Returns 0,
 * or -1 with a one-line reason in err (the gateway exits 2). */
int tls_init(const struct gw_config *cfg, char *err, size_t errlen);

/* 1 when the gateway serves HTTPS. */
int tls_enabled(void);

/* MHD_USE_TLS when TLS is on, else 0. */
unsigned tls_daemon_flags(void);

/* The options that set TLS up, ended by MHD_OPTION_END (only that when TLS
 * is off); static storage. */
const struct MHD_OptionItem *tls_daemon_options(void);

/* Reads the certificate and key again (SIGHUP); new handshakes use them,
 * connections already up keep theirs.  An invalid pair keeps the one in
 * force and logs one error line.  Returns 0 or -1. */
int tls_reload(void);

/* A connection's hold on the pair its handshake used, so that a pair a
 * reload replaced is freed once no connection uses it: the daemon's
 * connection notifier calls tls_connection_started when a connection is
 * accepted and tls_connection_closed with its result when it closes.  The
 * connection's socket context must point at a struct whose first member
 * is that result (a void *): the handshake finds it there.  NULL and a
 * no-op without TLS. */
void *tls_connection_started(void);
void tls_connection_closed(void *ctx);

/* Pairs loaded and not yet freed (the one in force included), for tests
 * and /metrics. */
unsigned tls_pairs_live(void);

/* Frees every certificate and key loaded, once the daemon has stopped. */
void tls_stop(void);

/* With --tls-client-ca: 1 when the connection's client sent a certificate
 * that chains to that CA, else 0.  Without it: always 1. */
int tls_client_verified(struct MHD_Connection *conn);

/* Writes data into conn's TLS session as one record, past libmicrohttpd
 * (which then closes the connection without writing more): 1 when all of
 * it went.  For an answer libmicrohttpd could not write (http.c). */
int tls_write_past_mhd(struct MHD_Connection *conn, const void *data, size_t len);

#endif
