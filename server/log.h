/* log.h -- one line per event on stderr, with a level and a UTC timestamp.
 *
 * Two formats (--log-format): text, "TIME LEVEL MESSAGE key=value ...",
 * the default; and json, one object per line:
 *   {"time":"2026-01-02T03:04:05.678Z","level":"info","message":"...",
 *    "fields":{"component":"redis","key":"value",...}}
 * where component is the message's leading "word: " (redis, http, auth,
 * ...; "lockgate" when there is none) and the other fields are the ones a
 * caller passed to log_kv.  Both formats carry the same facts.
 *
 * Lines are written with a single write(2) so concurrent threads never
 * interleave within a line.  Tokens and passwords are never passed to the
 * logger. */
#ifndef LOCKGATE_LOG_H
#define LOCKGATE_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_TEXT = 0, LOG_JSON };

/* Sets the lowest level that is printed (default LOG_INFO). */
void log_set_level(enum log_level level);

/* Parses "debug", "info", "warn" or "error"; returns -1 on anything else. */
int log_parse_level(const char *s);

/* Sets the line format (default LOG_TEXT); before the first line. */
void log_set_format(enum log_format format);

/* Parses "text" or "json"; returns -1 on anything else. */
int log_parse_format(const char *s);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line with named fields: kv is key, value, key, value, ..., NULL.  Text
 * appends " key=value" to the message; json puts them in "fields". */
void log_kv(enum log_level level, const char *const *kv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
