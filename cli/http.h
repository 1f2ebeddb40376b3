/* http.h -- one request to the gateway is a call.  call_start adds it to
 * the engine; http_wait waits (at most timeout_ms) for any socket, the
 * signal pipe or a timer, and marks finished calls done; answer.h reads
 * them. */
#ifndef LOCKCTL_HTTP_H
#define LOCKCTL_HTTP_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>

struct call {
    CURL *easy;                 /* libcurl's handle, NULL when not started */
    struct curl_slist *headers; /* the request's headers */
    char *req_body;             /* the request's body, NULL for none */
    char *body;                 /* the answer's body, NUL-terminated */
    size_t len;                 /* its length */
    size_t cap;                 /* its allocation */
    long status;                /* HTTP status, 0 when nothing came back */
    CURLcode rc;                /* the transfer's result, once done */
    int done;                   /* 1 once the transfer has ended */
    char err[CURL_ERROR_SIZE];  /* libcurl's words for rc */
    cJSON *json;                /* the body parsed, or NULL */
    long long sent_at;          /* now_ms() when the request started */
    long long silent_ms;        /* call_start_stream: a silent peer's bound, else 0 */
};

/* Sets up libcurl and the engine.  Returns 0 or -1. */
int http_init(void);
void http_cleanup(void);

/* Starts method on path (below the gateway URL) with an optional Lock-Token
 * and JSON body (taken over and freed), to finish within timeout_ms. */
void call_start(struct call *c, const char *method, const char *path, const char *token,
                cJSON *body, long long timeout_ms);

/* The same, asking for the media type accept (e.g. "text/event-stream");
 * timeout_ms < 0: no time limit once connected (a stream). */
void call_start_as(struct call *c, const char *method, const char *path, const char *token,
                   cJSON *body, long long timeout_ms, const char *accept);

/* A stream (call_start_as with no time limit) on a connection of its own,
 * whose peer is given up when it goes silent: TCP keepalive probes start
 * after silent_ms/2 without a byte from it and, unanswered, end the call
 * (an error) within about silent_ms (whole seconds, at least 2 s).  A host
 * that vanished without closing, which a reader alone never notices, so
 * ends the stream. */
void call_start_stream(struct call *c, const char *method, const char *path, const char *token,
                       cJSON *body, const char *accept, long long silent_ms);

/* The HTTP status of a call under way: once its answer's header came,
 * else 0 (a stream's status is known long before the call is done). */
long call_status_now(const struct call *c);

/* Ends a transfer under way and keeps what it received: c is done, with
 * rc as its result (CURLE_OK: the caller sets c->status and c->json, the
 * answer it read from the stream) and why, when not NULL, as libcurl's
 * words for it.  call_free frees it as any call. */
void call_stop(struct call *c, CURLcode rc, const char *why);

/* Ends the call, finished or not, and frees what it holds; c is zeroed. */
void call_free(struct call *c);

/* Waits up to timeout_ms for the gateway, a signal or a timer; drives the
 * transfers and marks the finished ones done. */
void http_wait(long long timeout_ms);

/* Runs a started call to its end.  Returns 0, or the number of a signal
 * asking lockctl to stop (then the call is abandoned, still to be freed). */
int call_finish(struct call *c);

/* A finished call's answer header name as a decimal integer, or dflt when
 * it is absent or not one. */
long long call_header_int(struct call *c, const char *name, long long dflt);

/* Sleeps ms, or less when a stop signal comes (returned, else 0). */
int sleep_ms(long long ms);

#endif
