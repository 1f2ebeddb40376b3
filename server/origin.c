/* origin.c -- see origin.h.
 *
 * Why refuse rather than merely leave out the CORS headers: a browser
 * sends a "simple" cross-site request (POST with Content-Type text/plain)
 * without a preflight, and the gateway would act on it (take a lock for a
 * day) even though the page never reads the answer.  Only a refusal before
 * the handler stops that; the missing Access-Control-Allow-Origin only
 * hides the answer. */
#include "server/origin.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static char allowed[ORIGIN_MAX][ORIGIN_MAX_LEN + 1];
static int nallowed;

/* Splits "scheme://hostport" into its parts: https (0/1), and the host and
 * port part without a default port (start and length).  -1 when it is not
 * an origin. */
static int split(const char *s, int *https, const char **hp, size_t *hp_len) {
    const char *rest;
    if (strncasecmp(s, "http://", 7) == 0) {
        *https = 0;
        rest = s + 7;
    } else if (strncasecmp(s, "https://", 8) == 0) {
        *https = 1;
        rest = s + 8;
    } else {
        return -1;
    }
    *hp = rest;
    *hp_len = strlen(rest);
    return 0;
}

/* The host[:port] part of an origin or of a Host header, without a
 * default port: "example.com:443" over https is "example.com". */
static size_t without_default_port(const char *hp, size_t len, int https) {
    const char *dflt = https ? ":443" : ":80";
    size_t dl = strlen(dflt);
    if (len > dl && strncmp(hp + len - dl, dflt, dl) == 0) return len - dl;
    return len;
}

/* host[:port]: a reg-name or IPv4 of [A-Za-z0-9.-], or an [IPv6] literal,
 * then an optional port of 1-5 digits. */
static int hostport_valid(const char *hp, size_t len) {
    size_t i = 0;
    if (len && hp[0] == '[') {
        while (i < len && hp[i] != ']') {
            if (!strchr("[0123456789abcdefABCDEF:.", hp[i])) return -1;
            i++;
        }
        if (i == len) return -1;
        i++;
    } else {
        while (i < len && (strchr("-.", hp[i]) || (hp[i] >= 'a' && hp[i] <= 'z') ||
                           (hp[i] >= 'A' && hp[i] <= 'Z') || (hp[i] >= '0' && hp[i] <= '9')))
            i++;
        if (i == 0) return -1;
    }
    if (i == len) return 0;
    if (hp[i] != ':' || len - i < 2 || len - i > 6) return -1;
    for (i++; i < len; i++)
        if (hp[i] < '0' || hp[i] > '9') return -1;
    return 0;
}

int origin_parse(const char *s) {
    int https;
    const char *hp;
    size_t len;
    if (!s || strlen(s) > ORIGIN_MAX_LEN || split(s, &https, &hp, &len) < 0) return -1;
    return hostport_valid(hp, len);
}

void origin_init(const char (*origins)[ORIGIN_MAX_LEN + 1], int n) {
    nallowed = n > ORIGIN_MAX ? ORIGIN_MAX : n;
    for (int i = 0; i < nallowed; i++) snprintf(allowed[i], sizeof allowed[i], "%s", origins[i]);
}

int origin_cors_enabled(void) { return nallowed > 0; }

/* 1 when a and b (host[:port] parts) name the same place. */
static int same_hostport(const char *a, size_t alen, const char *b, size_t blen, int https) {
    alen = without_default_port(a, alen, https);
    blen = without_default_port(b, blen, https);
    return alen == blen && strncasecmp(a, b, alen) == 0;
}

enum origin_verdict origin_check(const char *origin, const char *host, int tls) {
    if (!origin) return ORIGIN_NONE;
    int https;
    const char *hp;
    size_t len;
    if (origin_parse(origin) < 0 || split(origin, &https, &hp, &len) < 0) return ORIGIN_REFUSED;
    for (int i = 0; i < nallowed; i++) {
        int ahttps;
        const char *ahp;
        size_t alen;
        split(allowed[i], &ahttps, &ahp, &alen);
        if (ahttps == https && same_hostport(ahp, alen, hp, len, https)) return ORIGIN_LISTED;
    }
    /* The gateway's own origin: the scheme it serves and the Host the
     * browser sent.  (A page that reached the gateway by a name that DNS
     * rebinding pointed at it is "same origin" too; keys, which such a page
     * does not have, are the defence there.) */
    if (host && https == (tls ? 1 : 0) && same_hostport(hp, len, host, strlen(host), https))
        return ORIGIN_SAME;
    return ORIGIN_REFUSED;
}
