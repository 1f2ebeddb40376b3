/* log.h -- one line per event on stderr, with a level and a UTC timestamp.
 *
 * Lines are written with a single write(2) so concurrent threads never
 * interleave within a line.  Tokens are never passed to the logger. */
#ifndef LOCKGATE_LOG_H
#define LOCKGATE_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the lowest level that is printed (default LOG_INFO). */
void log_set_level(enum log_level level);

/* Parses "debug", "info", "warn" or "error"; returns -1 on anything else. */
int log_parse_level(const char *s);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
