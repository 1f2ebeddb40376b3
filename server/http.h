/* http.h -- the HTTP layer over libmicrohttpd.
 *
 * It accumulates the body (capped at HTTP_BODY_MAX), routes, calls the
 * handler, and sends the one reply the handler (or its Redis callback) built
 * with the reply_* functions.  Each worker thread has its own daemon on its
 * own loop (http_worker_new, bound with http_bind); a request lives on that
 * one thread.  A handler that starts a Redis call returns at once; the
 * connection is suspended until the reply is ready and resumed by the
 * callback, on the same thread, so no thread ever waits on Redis. */
#ifndef LOCKGATE_HTTP_H
#define LOCKGATE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "common/names.h"
#include "server/request.h"
#include "common/token.h"

struct loop;
struct http_worker;

/* A worker's daemon, listening on cfg's address beside the other workers'
 * (SO_REUSEPORT), driven by loop l; NULL (logged) when it cannot listen.
 * Bind it to the thread that runs l. */
struct http_worker *http_worker_new(const struct gw_config *cfg, struct loop *l);
void http_bind(struct http_worker *w);

/* Installs the access check (handlers/access.c) asked of every routed
 * request before its handler: GW_OK to go on, else it has replied.  Call
 * before the workers start; none means everyone may call everything. */
void http_set_gate(int (*fn)(struct gw_request *req));

/* Loop hooks (loop.h): how long libmicrohttpd may wait, and its run at the
 * end of a turn that resumed a connection or reached that time. */
int http_timeout_hook(void *arg, int64_t now_ms);
void http_turn_hook(void *arg, int64_t now_ms);

/* On a worker's thread: stops accepting connections on its daemon;
 * requests in flight go on.  Marks the gateway as shutting down. */
void http_quiesce(void);

/* Any thread: waits up to timeout_ms for the requests being handled (by
 * every worker) to finish.  A request whose body never arrived is not
 * waited for. */
void http_drain(int timeout_ms);

/* On a worker's thread, after its loop stopped: stops its daemon.  No
 * request may be suspended any more (see worker.c). */
void http_stop(void);

/* 1 after http_quiesce: new waits are refused with 503 shutting_down. */
int http_shutting_down(void);

/* Any thread: the gateway is leaving (SIGTERM, before the quiesce):
 * /readyz fails and each answer closes its connection, while requests,
 * waits included, are still served (main.c, --shutdown-delay-ms). */
void http_leave(void);

/* 1 after http_leave or http_quiesce. */
int http_leaving(void);

/* Number of requests between dispatch to a handler and their end. */
long http_in_flight(void);

/* A request header, or NULL.  Only from the handler. */
const char *http_header(struct gw_request *req, const char *name);

/* A query-string argument, or NULL.  Only from the handler. */
const char *http_query(struct gw_request *req, const char *name);

/* The client's socket, to watch for hang-up while waiting; -1 if unknown. */
int http_client_fd(struct gw_request *req);

/* 1 when the client has hung up (checked without blocking), e.g. before a
 * lock is handed to a request that waited. */
int http_client_gone(struct gw_request *req);

/* ---- answers that go on: Server-Sent Events ----------------------------------------
 * http_stream_open makes req's answer a stream: 200, text/event-stream, no
 * caching, X-Accel-Buffering: no (nginx then passes it on unbuffered), and
 * TCP_USER_TIMEOUT user_timeout_ms on the socket (a host that stops
 * acknowledging what is written is cut off).  Its headers go out at once
 * (a suspended connection is resumed); then each http_stream_write's bytes,
 * as the client takes them (chunked).  http_stream_end ends it after the
 * bytes written so far and completes the request.  A reply_* on req after
 * the open is sent as one last event, "event: error" with the reply's body
 * as data, and ends the stream.
 *
 * A stream's client that leaves is seen by the owner's waiter (its socket's
 * hang-up, waiters.h) while libmicrohttpd does not watch it (suspended, no
 * bytes to send); when libmicrohttpd closes the connection itself (a write
 * failed) before the request was completed, on_gone(req) is called once,
 * and the owner completes it (reply_* or http_stream_end) now or from the
 * callback it waits for.  On req's thread only. */
void http_stream_open(struct gw_request *req, void (*on_gone)(struct gw_request *req),
                      int user_timeout_ms);
void http_stream_write(struct gw_request *req, const char *data, size_t len);
/* One Server-Sent Event: "id: ID" (when id is not NULL), "event: EVENT",
 * "data: DATA" (one line: JSON printed unformatted), and the blank line. */
void http_stream_event(struct gw_request *req, const char *id, const char *event, const char *data);
/* http_stream_write(req, ":\n", 2), the comment line of a heartbeat, but
 * taking no memory while nothing else waits to be sent: written to every
 * idle stream at once, it would otherwise allocate a buffer per stream. */
void http_stream_comment(struct gw_request *req);
void http_stream_end(struct gw_request *req);
/* 1 once http_stream_open was called on req. */
int http_stream_opened(const struct gw_request *req);

/* A stream that outlives its request: a stream hold lives as long as its
 * connection, and 10,000 of them kept 10,000 requests they no longer read
 * (bench/RESULTS.md, "Stream holds: memory").  http_stream_detach (on an
 * opened stream, before it ends) frees req once the stream's head is out
 * (at once when it is), and from then on the stream is driven through the
 * handle it returns, never through req: req->ctx becomes the owner's
 * (req->ctx_free is not called), and the owner must have taken what it
 * keeps of req (name, token: set them NULL in req).  on_gone(arg) takes
 * the place of http_stream_open's (libmicrohttpd closed the connection
 * first; the owner then ends the stream now or later); on_end(arg) is
 * called once when the stream is freed, after its end and the
 * connection's, and the owner frees arg there.  On its thread only. */
struct gw_stream;
struct gw_stream *http_stream_detach(struct gw_request *req, void (*on_gone)(void *arg),
                                     void (*on_end)(void *arg), void *arg);
/* http_stream_event, http_stream_comment, http_stream_end,
 * http_client_fd and http_client_gone on such a stream (the request's
 * while it still has it). */
void http_detached_event(struct gw_stream *st, const char *event, const char *data);
void http_detached_comment(struct gw_stream *st);
void http_detached_end(struct gw_stream *st);
int http_detached_fd(struct gw_stream *st);
int http_detached_gone(struct gw_stream *st);

#endif
