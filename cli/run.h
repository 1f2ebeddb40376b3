/* run.h -- `lockctl run NAME CMD...`: take the lock, run the command while
 * renewing the lease, release, exit with the command's status. */
#ifndef LOCKCTL_RUN_H
#define LOCKCTL_RUN_H

#include "cli/options.h"

int cmd_run(struct opts *o);

/* `lockctl elect NAME --value V [OPTIONS] [--] COMMAND [ARGS...]`: run
 * COMMAND while leader of election NAME (run's machinery on
 * /v1/elections/NAME). */
int cmd_elect(struct opts *o);

#endif
