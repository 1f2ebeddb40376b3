/* accept.c -- see accept.h. */
#include "server/accept.h"

#include <string.h>
#include <strings.h>

#define OWS " \t"

/* Parses a qvalue ("0", "0.5", "1.000") into thousandths; -1 if bad. */
static int parse_q(const char *s, size_t len) {
    if (len == 0 || (s[0] != '0' && s[0] != '1')) return -1;
    int q = (s[0] - '0') * 1000, scale = 100;
    if (len == 1) return q;
    if (s[1] != '.' || len > 5) return -1;
    for (size_t i = 2; i < len; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9') return -1;
        q += (s[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* One element of the list: its range and its q (thousandths). */
struct range {
    const char *type, *sub; /* "*" for a wildcard */
    size_t type_len, sub_len;
    int q;
};

/* Parses [start, end) into r; returns 0, or -1 when it is not a range. */
static int parse_range(const char *start, const char *end, struct range *r) {
    while (start < end && strchr(OWS, *start)) start++;
    if (start >= end) return -1;
    const char *semi = memchr(start, ';', (size_t)(end - start));
    const char *mend = semi ? semi : end;
    while (mend > start && strchr(OWS, mend[-1])) mend--;
    const char *slash = memchr(start, '/', (size_t)(mend - start));
    if (!slash || slash == start || slash + 1 == mend) return -1;
    r->type = start;
    r->type_len = (size_t)(slash - start);
    r->sub = slash + 1;
    r->sub_len = (size_t)(mend - slash - 1);
    if (r->type_len == 1 && r->type[0] == '*' && !(r->sub_len == 1 && r->sub[0] == '*'))
        return -1; /* "* /json" is no range */
    r->q = 1000;
    for (const char *p = semi; p && p < end;) {
        const char *pstart = p + 1, *pend = memchr(pstart, ';', (size_t)(end - pstart));
        if (!pend) pend = end;
        while (pstart < pend && strchr(OWS, *pstart)) pstart++;
        const char *vend = pend;
        while (vend > pstart && strchr(OWS, vend[-1])) vend--;
        if (vend - pstart >= 2 && (pstart[0] == 'q' || pstart[0] == 'Q') && pstart[1] == '=') {
            r->q = parse_q(pstart + 2, (size_t)(vend - pstart - 2));
            if (r->q < 0) return -1;
            break; /* what follows q are accept-ext, not media parameters */
        }
        p = pend;
    }
    return 0;
}

/* How specifically r matches offer ("type/sub"): 3 exact, 2 type/ *,
 * 1 * / *, 0 not at all. */
static int specificity(const struct range *r, const char *offer) {
    const char *slash = strchr(offer, '/');
    size_t tlen = (size_t)(slash - offer);
    if (r->type_len == 1 && r->type[0] == '*') return 1;
    if (r->type_len != tlen || strncasecmp(r->type, offer, tlen) != 0) return 0;
    if (r->sub_len == 1 && r->sub[0] == '*') return 2;
    return r->sub_len == strlen(slash + 1) && strncasecmp(r->sub, slash + 1, r->sub_len) == 0 ? 3
                                                                                              : 0;
}

int accept_choose(const char *accept, const char *const *offers) {
    if (!accept || accept[strspn(accept, OWS ",")] == '\0') return 0;
    int best = -1, best_q = 0;
    for (int i = 0; offers[i]; i++) {
        int spec = 0, q = 0;
        for (const char *p = accept; *p;) {
            const char *end = strchr(p, ',');
            if (!end) end = p + strlen(p);
            struct range r;
            if (parse_range(p, end, &r) == 0) {
                int s = specificity(&r, offers[i]);
                if (s > spec) spec = s, q = r.q;
            }
            p = *end ? end + 1 : end;
        }
        if (q > best_q) best = i, best_q = q;
    }
    return best;
}
