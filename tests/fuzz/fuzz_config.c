/* fuzz_config.c -- configuration parsing (server/config.c): the input as
 * one value for each parser, then as a command line (words split at NUL
 * or newline) for config_load, and as a Redis password file's content
 * (secret_parse).  Every result is a setting or a one-line
 * reason, never a crash; TLS (rediss://) is on exactly when the URL or
 * endpoint says so. */
#include "server/config.h"
#include "server/secret.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    static struct gw_config cfg;
    struct gw_endpoint e;
    int64_t epoch;
    char *s = fuzz_cstr(data, size);
    memset(&cfg, 0, sizeof cfg);
    if (config_parse_listen(&cfg, s) == 0)
        assert(cfg.listen_port >= 0 && cfg.listen_port <= 65535 && cfg.listen_host[0]);
    if (config_parse_redis_url(&cfg, s) == 0) {
        assert(cfg.redis_host[0] && cfg.redis_port > 0);
        assert(cfg.redis_tls == (strncmp(s, "rediss://", 9) == 0)); /* TLS only if asked */
    }
    if (config_parse_endpoint(&e, s) == 0) {
        assert(e.port > 0 && !strpbrk(e.host, "@/"));
        assert(e.tls == (strncmp(s, "rediss://", 9) == 0));
    }
    (void)config_parse_epoch(s, &epoch);
    char pw[SECRET_MAX];
    const char *why = NULL;
    if (secret_parse((const char *)data, size, pw, &why) == 0)
        assert(pw[0] && strlen(pw) < SECRET_MAX && !strchr(pw, '\n'));
    else
        assert(why && why[0]);

    char *argv[17] = {"lockgate"};
    int argc = 1;
    for (char *p = s, *end = s + size; p < end && argc < 16;) {
        size_t n = strcspn(p, "\n");
        p[n] = '\0';
        argv[argc++] = p;
        p += n + 1;
    }
    argv[argc] = NULL;
    char err[256] = "";
    FILE *saved = stdout; /* --help prints the usage: not wanted here */
    stdout = fopen("/dev/null", "w");
    int rc = config_load(&cfg, argc, argv, err, sizeof err);
    fclose(stdout);
    stdout = saved;
    assert(rc == 0 || rc == 1 || (rc == -1 && err[0] && !strchr(err, '\n')));
    free(s);
    return 0;
}
