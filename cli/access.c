/* access.c -- see access.h. */
#include "cli/access.h"
#include "cli/ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char api_key[512]; /* "<id>.<secret>", "" for none */
static const char *cacert, *cert, *key;

static void set_key(const char *s) {
    size_t n = strcspn(s, "\r\n");
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n >= sizeof api_key) n = sizeof api_key - 1;
    memcpy(api_key, s, n);
    api_key[n] = '\0';
}

void access_from_env(void) {
    const char *k = getenv("LOCKGATE_API_KEY");
    if (k && *k) set_key(k);
}

int access_key_file(const char *path) {
    FILE *f = fopen(path, "r");
    char line[512];
    if (!f || !fgets(line, sizeof line, f)) {
        ctl_say("cannot read an API key from %s", path);
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    set_key(line);
    return 0;
}

void access_set_cacert(const char *path) { cacert = path; }
void access_set_cert(const char *path) { cert = path; }
void access_set_key(const char *path) { key = path; }

void access_apply(CURL *e, struct curl_slist **headers) {
    if (api_key[0]) {
        char h[sizeof api_key + 32];
        snprintf(h, sizeof h, "Authorization: Bearer %s", api_key);
        *headers = curl_slist_append(*headers, h);
    }
    if (cacert) curl_easy_setopt(e, CURLOPT_CAINFO, cacert);
    if (cert) curl_easy_setopt(e, CURLOPT_SSLCERT, cert);
    if (key) curl_easy_setopt(e, CURLOPT_SSLKEY, key);
}
