/* observe.h -- `lockctl observe NAME`: an election's leader and its
 * changes, as the gateway streams them. */
#ifndef LOCKCTL_OBSERVE_H
#define LOCKCTL_OBSERVE_H

#include "cli/options.h"

int cmd_observe(struct opts *o);

#endif
