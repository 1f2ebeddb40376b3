/* listing.h -- GET /v1/locks, /v1/semaphores and /v1/ids: who holds what,
 * one page at a time (listing.c, lua/list.lua).
 *
 * Cost model: nothing is indexed on acquire or release.  A page is a few
 * list.lua calls, each SCANning LISTING_COUNT keys with a MATCH on the
 * kind's key prefix and the name prefix asked for and decoding the holders
 * of the keys it found; the opaque cursor wraps Redis's SCAN cursor.  A
 * page may hold fewer entries than asked, even none, and still have a
 * cursor: only an empty cursor means the end.  In quorum
 * mode a listing reads the first master named (--redis), see README. */
#ifndef LOCKGATE_LISTING_H
#define LOCKGATE_LISTING_H

#include <stddef.h>

struct gw_request;

#define LISTING_DEFAULT_LIMIT 100
#define LISTING_MAX_LIMIT     1000
/* Keys one list.lua call SCANs: about a millisecond of Redis's time
 * (bench/RESULTS.md, "Listing"); a page is as many calls as it needs. */
#define LISTING_COUNT 100

/* Writes the SCAN MATCH pattern for keys "<key_prefix><kind>:{<name_prefix>...}"
 * into out (cap bytes), every glob character (* ? [ ] \) of the fixed part
 * escaped.  Returns its length, or -1 when it does not fit. */
int listing_pattern(const char *key_prefix, const char *kind, const char *name_prefix, char *out,
                    size_t cap);

/* The opaque cursor: base64url (no padding) of "c" and Redis's SCAN cursor
 * in decimal.  listing_cursor_encode returns "" for SCAN's "0" (done);
 * listing_cursor_decode writes the SCAN cursor ("0" for NULL or "") and
 * returns 0, or -1 for a cursor this gateway never made. */
void listing_cursor_encode(const char *scan_cursor, char *out, size_t cap);
int listing_cursor_decode(const char *cursor, char *scan_cursor, size_t cap);

void listing_locks(struct gw_request *req);
void listing_semaphores(struct gw_request *req);
void listing_ids(struct gw_request *req);

#endif
