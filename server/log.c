/* log.c -- see log.h. */
#include "server/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MESSAGE_MAX 1024 /* a message's bytes before formatting; longer is cut */

static atomic_int min_level = LOG_INFO;
static atomic_int format = LOG_TEXT;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"text", "json"};

void log_set_level(enum log_level level) { atomic_store(&min_level, level); }

int log_parse_level(const char *s) {
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0) return i;
    return -1;
}

void log_set_format(enum log_format f) { atomic_store(&format, f); }

int log_parse_format(const char *s) {
    for (int i = 0; i < 2; i++)
        if (strcasecmp(s, format_names[i]) == 0) return i;
    return -1;
}

/* ---- building one line ----------------------------------------------------- */

struct line {
    char buf[8 * MESSAGE_MAX]; /* a JSON escape is at most 6 bytes per byte */
    size_t len;
};

static void put(struct line *l, const char *s, size_t n) {
    if (n > sizeof l->buf - 2 - l->len) n = sizeof l->buf - 2 - l->len; /* room for '\n' */
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s) { put(l, s, strlen(s)); }

/* s as the inside of a JSON string: quotes, backslashes and control bytes
 * escaped, and bytes beyond ASCII as \u00XX, so that every line is valid
 * JSON (and UTF-8) whatever a message carries. */
static void put_json(struct line *l, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(l, esc, 2);
        } else if (c < 0x20 || c >= 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(l, esc, 6);
        } else {
            put(l, (const char *)&c, 1);
        }
    }
}

/* The message's leading "word: " (lowercase letters), or "lockgate". */
static size_t component(const char *msg, const char **name) {
    size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyz");
    if (n > 0 && msg[n] == ':' && msg[n + 1] == ' ') {
        *name = msg;
        return n;
    }
    *name = "lockgate";
    return 8;
}

static void emit(enum log_level level, const char *const *kv, const char *fmt, va_list ap) {
    if ((int)level < atomic_load(&min_level)) return;
    char msg[MESSAGE_MAX];
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    size_t mlen = m < 0 ? 0 : (size_t)m >= sizeof msg ? sizeof msg - 1 : (size_t)m;

    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);

    static _Thread_local struct line l;
    l.len = 0;
    if (atomic_load(&format) == LOG_JSON) {
        const char *comp;
        size_t clen = component(msg, &comp);
        puts_(&l, "{\"time\":\"");
        puts_(&l, when);
        puts_(&l, "\",\"level\":\"");
        puts_(&l, level_names[level]);
        puts_(&l, "\",\"message\":\"");
        put_json(&l, msg, mlen);
        puts_(&l, "\",\"fields\":{\"component\":\"");
        put_json(&l, comp, clen);
        puts_(&l, "\"");
        for (const char *const *p = kv; p && p[0] && p[1]; p += 2) {
            puts_(&l, ",\"");
            put_json(&l, p[0], strlen(p[0]));
            puts_(&l, "\":\"");
            put_json(&l, p[1], strlen(p[1]));
            puts_(&l, "\"");
        }
        puts_(&l, "}}");
    } else {
        char head[48];
        int n = snprintf(head, sizeof head, "%s %-5s ", when, level_names[level]);
        put(&l, head, (size_t)n);
        put(&l, msg, mlen);
        for (const char *const *p = kv; p && p[0] && p[1]; p += 2) {
            puts_(&l, " ");
            puts_(&l, p[0]);
            puts_(&l, "=");
            puts_(&l, p[1]);
        }
    }
    l.buf[l.len++] = '\n';
    ssize_t w = write(STDERR_FILENO, l.buf, l.len);
    (void)w;
}

void log_msg(enum log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(level, NULL, fmt, ap);
    va_end(ap);
}

void log_kv(enum log_level level, const char *const *kv, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(level, kv, fmt, ap);
    va_end(ap);
}
