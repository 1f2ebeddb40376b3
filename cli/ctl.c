/* ctl.c -- see ctl.h. */
#include "cli/ctl.h"

#include <stdarg.h>
#include <stdio.h>

int ctl_verbose;
char ctl_url[2048];
char ctl_session[129]; /* set by session.c, sent by http.c */

void ctl_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "lockctl: %s\n", line);
}
