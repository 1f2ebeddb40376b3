/* spawn.h -- starting the command `run` watches. */
#ifndef LOCKCTL_SPAWN_H
#define LOCKCTL_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* Finds the program as execvp would, before the lock is taken, so that a
 * typo costs no lock.  Returns 0 with its path in out, or an errno. */
int spawn_find_program(const char *cmd, char *out, size_t cap);

/* Starts the command (argv; sh_argv when it is a script without #!) in a
 * process group of its own, giving it the terminal when tty >= 0.  Returns
 * the pid, or -1 with *err set (an errno; the child's exec failed when
 * *exec_failed is 1). */
pid_t spawn_command(char *path, char **argv, char **sh_argv, int tty, int *err, int *exec_failed);

/* The terminal, if lockctl is in its foreground (the command gets it), or
 * -1. */
int spawn_terminal(void);

#endif
