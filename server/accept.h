/* accept.h -- content negotiation: which of a route's media types the
 * client's Accept header prefers (RFC 9110 12.5.1).  Pure: no HTTP
 * library, no I/O. */
#ifndef LOCKGATE_ACCEPT_H
#define LOCKGATE_ACCEPT_H

/* offers: the route's types ("type/subtype", no parameters), the server's
 * preferred first, NULL-terminated.  Returns the index of the offer with
 * the highest q-value (ties go to the earlier offer), or -1 when the client
 * accepts none of them (every matching range has q=0, or none matches).
 * Each offer's q-value comes from the most specific range that matches it
 * (type/subtype over type/ * over * / *); other parameters are ignored.
 * NULL, empty or blank accept means anything: returns 0.  An element
 * that does not parse (no '/', a bad q) is skipped. */
int accept_choose(const char *accept, const char *const *offers);

#endif
