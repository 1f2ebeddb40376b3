/* names.c -- see names.h. */
#include "common/names.h"

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int name_byte_ok(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

int name_valid(const char *s, size_t len) {
    if (len == 0 || len > NAME_MAX_LEN) return 0;
    for (size_t i = 0; i < len; i++)
        if (!name_byte_ok((unsigned char)s[i])) return 0;
    return 1;
}

int name_decode(const char *raw, size_t raw_len, char out[NAME_MAX_LEN + 1]) {
    size_t o = 0;
    for (size_t i = 0; i < raw_len; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == '%') {
            if (i + 2 >= raw_len) return -1;
            int hi = hexval(raw[i + 1]), lo = hexval(raw[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (!name_byte_ok(c) || o >= NAME_MAX_LEN) return -1;
        out[o++] = (char)c;
    }
    if (o == 0) return -1;
    out[o] = '\0';
    return (int)o;
}
