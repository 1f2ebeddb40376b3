/* test_secret.c -- the Redis password from --redis-password-file
 * (server/secret.c): the file's content rule, and a file read again before
 * each connection, kept when it stops reading. */
#include "server/secret.h"
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_secret_parse(void) {
    char out[SECRET_MAX];
    const char *why = NULL;
    CHECK_EQ_INT(secret_parse("pw", 2, out, &why), 0);
    CHECK_EQ_STR(out, "pw");
    CHECK_EQ_INT(secret_parse("pw\n", 3, out, &why), 0); /* echo pw > file */
    CHECK_EQ_STR(out, "pw");
    CHECK_EQ_INT(secret_parse("pw\r\n", 4, out, &why), 0);
    CHECK_EQ_STR(out, "pw");
    CHECK_EQ_INT(secret_parse(" p w ", 5, out, &why), 0); /* spaces are the password's */
    CHECK_EQ_STR(out, " p w ");

    const struct {
        const char *s;
        size_t len;
    } bad[] = {
        {"",       0},
        {"\n",     1},
        {"\r\n",   2},
        {"a\nb",   3},
        {"a\nb\n", 4},
        {"a\0b",   3},
        {"pw\n\n", 4},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        CHECK_EQ_INT(secret_parse(bad[i].s, bad[i].len, out, &why), -1);
        CHECK(why && why[0]);
    }
    char big[SECRET_MAX + 1];
    memset(big, 'p', sizeof big);
    CHECK_EQ_INT(secret_parse(big, SECRET_MAX - 1, out, &why), 0);
    CHECK_EQ_INT(secret_parse(big, SECRET_MAX, out, &why), -1);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_secret_file(void) {
    char dir[] = "/tmp/lockgate-secret-XXXXXX", path[64], err[256] = "", pw[SECRET_MAX];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/pw", dir);
    struct gw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.redis_password_file, sizeof cfg.redis_password_file, "%s", path);

    CHECK_EQ_INT(secret_init(&cfg, err, sizeof err), -1); /* no file yet */
    CHECK(strstr(err, path) != NULL);

    write_file(path, "first\n");
    CHECK_EQ_INT(secret_init(&cfg, err, sizeof err), 0);
    secret_redis_password(pw);
    CHECK_EQ_STR(pw, "first");
    write_file(path, "second\n"); /* rotated: the next connection has it */
    secret_redis_password(pw);
    CHECK_EQ_STR(pw, "second");
    unlink(path); /* gone or unreadable: the last one read stays */
    secret_reload();
    secret_redis_password(pw);
    CHECK_EQ_STR(pw, "second");
    write_file(path, "\n"); /* empty: likewise */
    secret_redis_password(pw);
    CHECK_EQ_STR(pw, "second");
    unlink(path);
    rmdir(dir);

    /* Without a file, the URL's password. */
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.redis_password, "from-url");
    CHECK_EQ_INT(secret_init(&cfg, err, sizeof err), 0);
    secret_redis_password(pw);
    CHECK_EQ_STR(pw, "from-url");
}

int main(void) {
    RUN(test_secret_parse);
    RUN(test_secret_file);
    return check_summary("secret");
}
