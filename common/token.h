/* token.h -- lock tokens, the rule both binaries check (openapi.yaml,
 * "LockToken": 22-128 characters of [A-Za-z0-9_-]) and the tokens the
 * gateway and `lockctl run` make: 128 bits from getrandom() (read in
 * batches), base64url. */
#ifndef LOCKGATE_TOKEN_H
#define LOCKGATE_TOKEN_H

#include <stddef.h>

#define TOKEN_NEW_LEN 22  /* length of a token the server makes */
#define TOKEN_MIN_LEN 22  /* shortest token a client may choose */
#define TOKEN_MAX_LEN 128 /* longest token a client may choose */

/* Writes a new 22-character token and a NUL into out.  Ends the process
 * (fatal.h) if the kernel cannot give randomness: nothing safe can be done
 * then. */
void token_new(char out[TOKEN_NEW_LEN + 1]);

/* Returns 1 when s is 22-128 characters of [A-Za-z0-9_-], else 0. */
int token_valid(const char *s);

#endif
