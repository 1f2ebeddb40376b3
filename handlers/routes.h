/* routes.h -- the route table (routes.c). */
#ifndef LOCKGATE_ROUTES_H
#define LOCKGATE_ROUTES_H

#include <stddef.h>

#include "server/router.h"

extern const struct gw_route gw_routes[];
extern const size_t gw_routes_count;

#endif
