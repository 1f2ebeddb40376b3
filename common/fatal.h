/* fatal.h -- the one way either binary gives up: one line on stderr, then
 * abort() (the gateway: a core to look at) or exit with a status (lockctl:
 * its documented "internal error" status). */
#ifndef LOCKGATE_FATAL_H
#define LOCKGATE_FATAL_H

/* Names the program in the line and chooses the ending: exit_status < 0
 * aborts, otherwise exit(exit_status).  Until called: "lockgate", abort. */
void fatal_setup(const char *program, int exit_status);

/* Prints "<program>: <message>" and ends the process. */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
