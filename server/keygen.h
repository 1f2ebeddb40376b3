/* keygen.h -- `lockgate keygen ID [--grant KIND:PREFIX:ACCESS]...`: a new
 * API key.  Prints the secret once (256 bits from getrandom, base64url) and
 * the JSON entry for the auth file, which holds only the secret's SHA-256. */
#ifndef LOCKGATE_KEYGEN_H
#define LOCKGATE_KEYGEN_H

#include <stddef.h>

/* argv[0] is "keygen".  Returns the exit status (2 on a usage error). */
int keygen_main(int argc, char **argv);

/* Parses "KIND:PREFIX:ACCESS" (the prefix may hold ':', names may);
 * returns 0 or -1. */
int keygen_parse_grant(const char *s, int *kind, char *prefix, size_t prefix_cap, int *access);

#endif
