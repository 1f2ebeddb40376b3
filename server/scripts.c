/* scripts.c -- see scripts.h.  The bytes come from build/gen/lua_scripts.h,
 * made by `xxd -i` (so the names are acquire_lua, acquire_lua_len, ...). */
#include "server/scripts.h"
#include "common/alloc.h"
#include "server/sha1.h"

#include <stdlib.h>
#include <string.h>

#include "lua_scripts.h"

#define SCRIPT(id, file, sym) [id] = {file, sym, sizeof sym, "", 0, 0}
/* The scripts that judge holders read live holders' leases in the liveness
 * hash (server/redis.c, live_key); a listing reads it as it reads what SCAN
 * finds, undeclared. */
#define JUDGE(id, file, sym) [id] = {file, sym, sizeof sym, "", 0, 1}
/* The scripts that grant a fresh hold judge holders, and check the marker
 * (lua/_marker.lua). */
#define GRANT(id, file, sym) [id] = {file, sym, sizeof sym, "", 1, 1}

static struct script scripts[SCRIPT_COUNT] = {
    GRANT(SCRIPT_ACQUIRE, "acquire.lua", acquire_lua),
    JUDGE(SCRIPT_EXTEND, "extend.lua", extend_lua),
    JUDGE(SCRIPT_RELEASE, "release.lua", release_lua),
    JUDGE(SCRIPT_INSPECT, "inspect.lua", inspect_lua),
    JUDGE(SCRIPT_DEQUEUE, "dequeue.lua", dequeue_lua),
    SCRIPT(SCRIPT_ID_LEASE, "id_lease.lua", id_lease_lua),
    SCRIPT(SCRIPT_FENCE_RAISE, "fence_raise.lua", fence_raise_lua),
    SCRIPT(SCRIPT_ID_READ, "id_read.lua", id_read_lua),
    SCRIPT(SCRIPT_ID_CLAIM, "id_claim.lua", id_claim_lua),
    JUDGE(SCRIPT_SESSION_CREATE, "session_create.lua", session_create_lua),
    JUDGE(SCRIPT_SESSION_RENEW, "session_renew.lua", session_renew_lua),
    JUDGE(SCRIPT_SESSION_READ, "session_read.lua", session_read_lua), /* its liveness field */
    SCRIPT(SCRIPT_SESSION_END, "session_end.lua", session_end_lua),
    GRANT(SCRIPT_MULTI_ACQUIRE, "multi_acquire.lua", multi_acquire_lua),
    JUDGE(SCRIPT_MULTI_RELEASE, "multi_release.lua", multi_release_lua),
    JUDGE(SCRIPT_MULTI_EXTEND, "multi_extend.lua", multi_extend_lua),
    SCRIPT(SCRIPT_LIST, "list.lua", list_lua),
    JUDGE(SCRIPT_FORCE, "force.lua", force_lua),
    JUDGE(SCRIPT_WATCH, "watch.lua", watch_lua),
    SCRIPT(SCRIPT_LIST_CLUSTER, "list_cluster.lua", list_cluster_lua),
    SCRIPT(SCRIPT_SESSION_BIND, "session_bind.lua", session_bind_lua),
    JUDGE(SCRIPT_SESSION_SLOT, "session_slot.lua", session_slot_lua),
    SCRIPT(SCRIPT_LIVENESS, "liveness.lua", liveness_lua),
    JUDGE(SCRIPT_PROCLAIM, "proclaim.lua", proclaim_lua),
    SCRIPT(SCRIPT_QUOTA, "quota.lua", quota_lua),
    JUDGE(SCRIPT_WATCH_LOG, "watch_log.lua", watch_log_lua),
    SCRIPT(SCRIPT_HOLDOFF, "holdoff.lua", holdoff_lua),
};

/* s with keycheck.lua in front, after its first line when that is a
 * shebang (which must stay first).  Made once, kept for the process. */
static void guard(struct script *s) {
    size_t head = 0;
    if (s->len > 2 && s->src[0] == '#' && s->src[1] == '!')
        while (head < s->len && s->src[head++] != '\n') continue;
    unsigned char *out = alloc_check(malloc(s->len + keycheck_lua_len));
    memcpy(out, s->src, head);
    memcpy(out + head, keycheck_lua, keycheck_lua_len);
    memcpy(out + head + keycheck_lua_len, s->src + head, s->len - head);
    s->src = out;
    s->len += keycheck_lua_len;
}

void scripts_init(int keycheck) {
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        if (keycheck && i != SCRIPT_LIST && i != SCRIPT_LIST_CLUSTER) guard(&scripts[i]);
        sha1_hex(scripts[i].src, scripts[i].len, scripts[i].sha);
    }
}

const struct script *script_get(enum script_id id) { return &scripts[id]; }
