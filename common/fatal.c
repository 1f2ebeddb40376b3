/* fatal.c -- see fatal.h. */
#include "common/fatal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *fatal_program = "lockgate";
static int fatal_status = -1;

void fatal_setup(const char *program, int exit_status) {
    fatal_program = program;
    fatal_status = exit_status;
}

void fatal(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", fatal_program, line);
    if (fatal_status < 0) abort();
    exit(fatal_status);
}
