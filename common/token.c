/* token.c -- see token.h. */
#include "common/token.h"

#include "common/fatal.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Randomness is read from the kernel 32 tokens at a time, per thread: one
 * getrandom() per acquire was a tenth of the syscalls of a lock request.
 * Bytes are wiped from the buffer as they are handed out.  (The gateway
 * never forks, and lockctl's child only execs, so no two processes ever
 * hand out tokens from one buffer.) */
#define RANDOM_BATCH 512

static void random_bytes(unsigned char *out, size_t n) {
    static _Thread_local unsigned char buf[RANDOM_BATCH];
    static _Thread_local size_t left;
    if (left < n) {
        size_t got = 0;
        while (got < sizeof buf) {
            ssize_t r = getrandom(buf + got, sizeof buf - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) fatal("getrandom failed: %s", strerror(errno));
            got += (size_t)r;
        }
        left = sizeof buf;
    }
    unsigned char *from = buf + sizeof buf - left;
    memcpy(out, from, n);
    memset(from, 0, n);
    left -= n;
}

void token_new(char out[TOKEN_NEW_LEN + 1]) {
    unsigned char rnd[16];
    random_bytes(rnd, sizeof rnd);
    /* 128 bits = 21 groups of 6 bits and 2 bits left over: 22 characters. */
    int bits = 0, o = 0;
    unsigned acc = 0;
    for (size_t i = 0; i < sizeof rnd; i++) {
        acc = (acc << 8) | rnd[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64url[(acc >> bits) & 63];
        }
    }
    out[o++] = b64url[(acc << (6 - bits)) & 63];
    out[o] = '\0';
}

int token_valid(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
        if (n >= TOKEN_MAX_LEN) return 0;
    }
    return n >= TOKEN_MIN_LEN;
}
