/* signals.h -- signals as events: `run` catches INT, TERM, HUP, QUIT, USR1,
 * USR2, CHLD and TSTP through a self-pipe and ignores PIPE, TTOU and TTIN. */
#ifndef LOCKCTL_SIGNALS_H
#define LOCKCTL_SIGNALS_H

#include <sys/types.h>

/* Opens the pipe and installs the handlers.  Returns 0, or -1 (errno). */
int signals_install(void);

/* The pipe's read end to poll, or -1 before signals_install. */
int signals_fd(void);

/* Reads what the handlers wrote into the pending set. */
void signals_drain(void);

/* Takes sig off the pending set: returns 1 if it was pending. */
int sig_take(int sig);

/* Takes the first pending signal that asks lockctl to stop (INT, TERM,
 * HUP, QUIT) and returns it, or 0. */
int sig_take_stop(void);

/* Forgets every pending signal. */
void signals_forget(void);

/* Sends each pending INT, TERM, HUP, QUIT, USR1, USR2 on to the process
 * group, and takes it off the pending set. */
void signals_pass_on(pid_t group);

/* In a forked child: every signal back to its default action. */
void signals_default_in_child(void);

#endif
