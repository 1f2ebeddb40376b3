/* redis_tls.h -- TLS to Redis, as a transport under hiredis.
 *
 * hiredis 0.14 (Debian 12) speaks plain TCP only, and can be handed no
 * socket of ours.  So a TLS connection is made in two halves: hiredis
 * makes its TCP connection to Redis as usual (redisAsyncConnect: its own
 * name lookup, non-blocking connect); redis_tls_wrap then takes that
 * socket away from it (dup) and puts one end of a socketpair under the
 * same descriptor number (dup2), so hiredis reads and writes plain RESP on
 * the socketpair while this file runs GnuTLS on the real socket and copies
 * between the two, on the same loop and thread as hiredis.
 *
 *   hiredis <-- plain RESP --> socketpair <-- this file --> TLS --> Redis
 *
 * Cost: each byte is copied once more (socketpair in, socketpair out) and
 * each burst costs two more system calls per direction; there is no thread
 * and no context switch (bench/RESULTS.md, "TLS to Redis").
 *
 * The link tells its owner when the handshake is done and verified (up),
 * or why it failed (one short sentence for a log line and /readyz, never
 * a secret); the owner keeps hiredis's descriptor off the loop until up,
 * so hiredis's connect callback means "TLS is up" and the owner's connect
 * timeout covers the TCP connect and the handshake together.
 *
 * Verification (the default): the chain against --redis-tls-ca (else the
 * system's trust store) and the name: --redis-tls-server-name, else the
 * host the connection was made to (an address is matched against the
 * certificate's IP SANs).  The name is sent as SNI unless it is an
 * address.  --redis-tls-insecure checks neither. */
#ifndef LOCKGATE_REDIS_TLS_H
#define LOCKGATE_REDIS_TLS_H

#include <stddef.h>

#include "server/config.h"

struct loop;
struct redis_tls_link;

/* Loads the CA, the client certificate and key, once, before any
 * connection (the credentials are shared, read-only, by every thread).
 * Returns 0, or -1 with a one-line reason in err.  Does nothing when no
 * endpoint uses TLS. */
int redis_tls_init(const struct gw_config *cfg, char *err, size_t errlen);

/* What the owner is told, on the loop's thread, from the link's own
 * events: up (verified; hiredis may go), or failed with why (a static or
 * link-owned string, valid until the link is freed).  After failed the
 * link does nothing more; the owner frees it. */
struct redis_tls_owner {
    void (*up)(void *arg);
    /* refused: TLS itself failed (handshake, verification, an alert
     * before any answer), kept for /readyz; else the connect or a
     * connection that had worked. */
    void (*failed)(void *arg, const char *why, int refused);
    void *arg;
};

/* Takes over *fd, hiredis's connecting socket to host (what is verified,
 * unless --redis-tls-server-name), leaving a socketpair end under the same
 * number.  Returns the link, or NULL with why in err (the socket is then
 * untouched). */
struct redis_tls_link *redis_tls_wrap(struct loop *l, int fd, const char *host, int port,
                                      const struct redis_tls_owner *owner, char *err,
                                      size_t errlen);

/* Moves what hiredis has written so far towards Redis now, not at the
 * loop's next turn (called right after hiredis wrote). */
void redis_tls_flush(struct redis_tls_link *k);

/* The owner's connect timeout passed (after ms): when the link was in its
 * handshake, it fails as a refusal (logged once, kept for /readyz: a
 * plain port given as rediss:// never answers a ClientHello), its reason
 * copied to why, and 1 is returned; else 0 (the TCP connect itself did
 * not finish: the owner's plain timeout). */
int redis_tls_expire(struct redis_tls_link *k, int ms, char *why, size_t cap);

/* The real socket, for getsockname (the address Redis sees). */
int redis_tls_socket(const struct redis_tls_link *k);

/* Closes the link's descriptors (not hiredis's) and frees it. */
void redis_tls_free(struct redis_tls_link *k);

/* The last refusal (a failed handshake or verification, an alert) of any
 * connection, "host:port: why", until a connection to that Redis gets an
 * answer: 1 and the text in out, else 0.  From any thread (/readyz). */
int redis_tls_refusal(char *out, size_t cap);

#endif
