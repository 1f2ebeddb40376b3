/* commands.h -- each command: takes the parsed command line, returns the
 * exit status.  `run` is run.h's. */
#ifndef LOCKCTL_COMMANDS_H
#define LOCKCTL_COMMANDS_H

#include "cli/options.h"

#include <stddef.h>

int cmd_acquire(struct opts *o);
int cmd_extend(struct opts *o);
int cmd_release(struct opts *o);
int cmd_status(struct opts *o);
int cmd_id(struct opts *o);

/* operator.c */
int cmd_ls(struct opts *o);
int cmd_watch(struct opts *o);
/* "/v1/locks/NAME?force=true", for release --force. */
void force_path(char *out, size_t cap, const char *name);

#endif
