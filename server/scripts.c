/* scripts.c -- see scripts.h.  The bytes come from build/gen/lua_scripts.h,
 * made by `xxd -i` inside lua/ (so the names are lock_acquire_lua, ...). */
#include "server/scripts.h"
#include "server/sha1.h"

#include "lua_scripts.h"

#define SCRIPT(id, file, sym) [id] = {file, sym, sizeof sym, ""}

static struct script scripts[SCRIPT_COUNT] = {
    SCRIPT(SCRIPT_LOCK_ACQUIRE, "lock_acquire.lua", lock_acquire_lua),
    SCRIPT(SCRIPT_LOCK_EXTEND, "lock_extend.lua", lock_extend_lua),
    SCRIPT(SCRIPT_LOCK_RELEASE, "lock_release.lua", lock_release_lua),
    SCRIPT(SCRIPT_LOCK_INSPECT, "lock_inspect.lua", lock_inspect_lua),
};

void scripts_init(void) {
    for (int i = 0; i < SCRIPT_COUNT; i++)
        sha1_hex(scripts[i].src, scripts[i].len, scripts[i].sha);
}

const struct script *script_get(enum script_id id) { return &scripts[id]; }
