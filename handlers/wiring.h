/* wiring.h -- the handlers' composition root: the one place that knows
 * every handler module and fills the tables the layers below call
 * through.  Nothing in handlers/ calls back into it. */
#ifndef LOCKGATE_WIRING_H
#define LOCKGATE_WIRING_H

#include "server/config.h"

/* Once, at start, before any request: keeps the settings (handlers_config),
 * installs the route table and the access gate, picks the backend the
 * settings name, and lets each module register its /metrics sources. */
void handlers_init(const struct gw_config *cfg);

#endif
