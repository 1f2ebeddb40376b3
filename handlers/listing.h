/* listing.h -- GET /v1/locks, /v1/semaphores and /v1/ids: who holds what,
 * one page at a time (listing.c, lua/list.lua).
 *
 * Cost model: nothing is indexed on acquire or release.  A page is a few
 * list.lua calls, each SCANning LISTING_COUNT keys with a MATCH on the
 * kind's key prefix and the name prefix asked for and decoding the holders
 * of the keys it found; the opaque cursor wraps Redis's SCAN cursor.  A
 * page may hold fewer entries than asked, even none, and still have a
 * cursor: only an empty cursor means the end.  In quorum
 * mode a listing reads the first master named (--redis), see docs/operations.md. */
#ifndef LOCKGATE_LISTING_H
#define LOCKGATE_LISTING_H

#include "common/names.h"
#include "server/redis.h"

#include <stddef.h>

struct gw_request;

#define LISTING_DEFAULT_LIMIT 100
#define LISTING_MAX_LIMIT     1000
/* Keys one list.lua call SCANs: about a millisecond of Redis's time
 * (bench/RESULTS.md, "Listing"); a page is as many calls as it needs. */
#define LISTING_COUNT 100

/* One list.lua call with argv (cursor, pattern, count, what): on the
 * master-th master in Redis Cluster mode (each master's keys in turn:
 * lua/list_cluster.lua), else on the Redis (master ignored). */
void listing_scan(int master, const char *const argv[4], const size_t lens[4], redis_cb cb,
                  void *arg);

/* The request's ?prefix= ("" when none), or NULL once answered 400
 * invalid_name (not a name's first characters: common/names.h). */
const char *listing_prefix_or_reply(struct gw_request *req);

/* Writes the SCAN MATCH pattern for keys "<key_prefix><kind>:{<name_prefix>...}"
 * into out (cap bytes), every glob character (* ? [ ] \) of the fixed part
 * escaped.  Returns its length, or -1 when it does not fit. */
int listing_pattern(const char *key_prefix, const char *kind, const char *name_prefix, char *out,
                    size_t cap);

/* Where a listing goes on from: Redis's SCAN cursor (decimal), the master
 * it is on in cluster mode (-1 otherwise), and, when the page before ended
 * in the middle of one SCAN call's keys (a page holds at most limit
 * entries), that call's next cursor and the last name the page showed:
 * the next page makes the same call again and skips the names up to that
 * one, unless the call now goes further in scan order (keys of its range
 * were deleted, or the table shrank: then it shows them all again, as SCAN
 * may repeat a key; listing.c, list_done). */
struct listing_cursor {
    int master;
    char scan[21], next[21];
    char after[NAME_MAX_LEN + 1];
};

/* The opaque cursor: base64url (no padding) of
 * "c" [master ":"] scan [" " next " " after].  listing_cursor_encode writes
 * "" for the end (scan "0", nothing after, no master); listing_cursor_decode
 * reads NULL or "" as the start (scan "0", master -1) and returns 0, or -1
 * for a cursor this gateway never made. */
#define LISTING_CURSOR_RAW_MAX (1 + 6 + 21 + 21 + NAME_MAX_LEN)
#define LISTING_CURSOR_MAX     ((LISTING_CURSOR_RAW_MAX + 2) / 3 * 4)
void listing_cursor_encode(const struct listing_cursor *c, char *out, size_t cap);
int listing_cursor_decode(const char *cursor, struct listing_cursor *c);

void listing_locks(struct gw_request *req);
void listing_semaphores(struct gw_request *req);
void listing_ids(struct gw_request *req);

#endif
