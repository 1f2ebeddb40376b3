/* http.c -- the HTTP engine: libcurl's multi interface, so that one
 * poll(2), in curl_multi_poll, waits on the gateway's sockets, the renewal
 * timer and the signal self-pipe.  `run` is therefore one loop with no
 * threads: a renewal in flight never delays noticing that the command
 * exited or that a signal arrived.  Connections are kept in the multi
 * handle and reused from one call to the next. */
#include "cli/http.h"
#include "cli/access.h"
#include "cli/ctl.h"
#include "cli/signals.h"
#include "common/alloc.h"
#include "common/fatal.h"
#include "common/token.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static CURLM *multi;

static size_t call_write(char *p, size_t size, size_t n, void *ud) {
    struct call *c = ud;
    size_t add = size * n;
    if (c->len + add + 1 > c->cap) {
        size_t cap = (c->len + add + 1) * 2;
        char *b = alloc_check(realloc(c->body, cap));
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, p, add);
    c->len += add;
    c->body[c->len] = '\0';
    return add;
}

static curl_socket_t open_cloexec(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void call_free(struct call *c) {
    if (c->easy) {
        if (!c->done) curl_multi_remove_handle(multi, c->easy);
        curl_easy_cleanup(c->easy);
    }
    curl_slist_free_all(c->headers);
    free(c->req_body);
    free(c->body);
    cJSON_Delete(c->json);
    memset(c, 0, sizeof *c);
}

long call_status_now(const struct call *c) {
    long status = 0;
    if (c->easy) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

void call_stop(struct call *c, CURLcode rc, const char *why) {
    if (c->easy && !c->done) curl_multi_remove_handle(multi, c->easy);
    c->done = 1;
    c->rc = rc;
    if (why) snprintf(c->err, sizeof c->err, "%s", why);
}

void call_start(struct call *c, const char *method, const char *path, const char *token,
                cJSON *body, long long timeout_ms) {
    call_start_as(c, method, path, token, body, timeout_ms, "application/json");
}

/* Sets up c's transfer (call_start_as's), not yet added to the engine. */
static void call_prepare(struct call *c, const char *method, const char *path, const char *token,
                         cJSON *body, long long timeout_ms, const char *accept) {
    memset(c, 0, sizeof *c);
    c->easy = alloc_check(curl_easy_init());
    char url[sizeof ctl_url + 512];
    snprintf(url, sizeof url, "%s%s", ctl_url, path);
    char th[TOKEN_MAX_LEN + 16];
    char ah[128];
    snprintf(ah, sizeof ah, "Accept: %s", accept);
    c->headers = curl_slist_append(c->headers, ah);
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (token) {
        snprintf(th, sizeof th, "Lock-Token: %s", token);
        c->headers = curl_slist_append(c->headers, th);
    }
    if (ctl_session[0]) {
        char sh[TOKEN_MAX_LEN + 16];
        snprintf(sh, sizeof sh, "Session: %s", ctl_session);
        c->headers = curl_slist_append(c->headers, sh);
    }
    if (body) {
        c->req_body = alloc_check(cJSON_PrintUnformatted(body));
        cJSON_Delete(body);
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    }
    CURL *e = c->easy;
    access_apply(e, &c->headers);
    alloc_check(c->headers); /* NULL once any append failed */
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->req_body ? c->req_body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, c->req_body ? (long)strlen(c->req_body) : 0L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "lockctl/" CTL_VERSION);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, call_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (timeout_ms < 0) { /* a stream: no end, connecting only is bounded */
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CTL_CONNECT_MS);
    } else {
        timeout_ms = max_ll(timeout_ms, 1);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)min_ll(timeout_ms, LONG_MAX));
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)min_ll(timeout_ms, CTL_CONNECT_MS));
    }
    c->sent_at = now_ms();
}

static void call_add(struct call *c) {
    if (curl_multi_add_handle(multi, c->easy) != CURLM_OK) fatal("libcurl cannot start a transfer");
}

void call_start_as(struct call *c, const char *method, const char *path, const char *token,
                   cJSON *body, long long timeout_ms, const char *accept) {
    call_prepare(c, method, path, token, body, timeout_ms, accept);
    call_add(c);
}

/* The stream's socket, as libcurl opens it: keepalive probes from half the
 * bound of silence on, a third of the rest apart, three unanswered end
 * the connection (Linux counts from the last segment received). */
static int keepalive_on(void *ud, curl_socket_t fd, curlsocktype purpose) {
    const struct call *c = ud;
    int on = 1;
    int idle = (int)max_ll(c->silent_ms / 2000, 1);
    int intvl = (int)max_ll((c->silent_ms / 1000 - idle) / 3, 1);
    int cnt = 3;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) < 0)
        return CURL_SOCKOPT_ERROR;
    return CURL_SOCKOPT_OK;
}

void call_start_stream(struct call *c, const char *method, const char *path, const char *token,
                       cJSON *body, const char *accept, long long silent_ms) {
    call_prepare(c, method, path, token, body, -1, accept);
    c->silent_ms = silent_ms;
    /* Its own connection: the options apply when a socket is opened, and
     * one that held a stream is never handed to another call. */
    curl_easy_setopt(c->easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(c->easy, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(c->easy, CURLOPT_SOCKOPTFUNCTION, keepalive_on);
    curl_easy_setopt(c->easy, CURLOPT_SOCKOPTDATA, c);
    call_add(c);
}

void http_wait(long long timeout_ms) {
    int sig_fd = signals_fd();
    struct curl_waitfd extra = {.fd = sig_fd, .events = CURL_WAIT_POLLIN};
    int nfds = 0, running = 0;
    timeout_ms = max_ll(0, min_ll(timeout_ms, INT_MAX));
    curl_multi_poll(multi, sig_fd >= 0 ? &extra : NULL, sig_fd >= 0 ? 1 : 0, (int)timeout_ms,
                    &nfds);
    curl_multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        struct call *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        c->rc = m->data.result;
        if (c->rc == CURLE_OK) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
        if (c->body) c->json = cJSON_ParseWithLength(c->body, c->len);
        curl_multi_remove_handle(multi, c->easy);
        c->done = 1;
    }
    signals_drain();
}

int call_finish(struct call *c) {
    while (!c->done) {
        http_wait(1000);
        int sig = sig_take_stop();
        if (sig) return sig;
    }
    return 0;
}

long long call_header_int(struct call *c, const char *name, long long dflt) {
    struct curl_header *h;
    if (!c->easy || curl_easy_header(c->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
        return dflt;
    char *end;
    long long v = strtoll(h->value, &end, 10);
    return end != h->value && *end == '\0' ? v : dflt;
}

int sleep_ms(long long ms) {
    long long end = now_ms() + ms;
    for (long long left = ms; left > 0; left = end - now_ms()) {
        http_wait(left);
        int sig = sig_take_stop();
        if (sig) return sig;
    }
    return 0;
}

int http_init(void) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return -1;
    multi = curl_multi_init();
    return multi ? 0 : -1;
}

void http_cleanup(void) {
    curl_multi_cleanup(multi);
    multi = NULL;
    curl_global_cleanup();
}
