/* test_log.c -- the log line formats (server/log.c): text by default, and
 * json, where every line is one object with time, level, message and
 * fields, whatever bytes a message carries. */
#include "server/log.h"
#include "tests/check.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Runs fn with stderr sent to a file; returns what was written (static). */
static const char *captured(void (*fn)(void)) {
    static char out[16384];
    FILE *tmp = tmpfile();
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return out;
}

static void some_lines(void) {
    log_info("redis: command connection up to %s:%d", "127.0.0.1", 6379);
    log_warn("a \"quoted\" back\\slash, a tab\there, a newline\nand a byte \xff");
    const char *kv[] = {"redis", "h:1", "user", "app \"x\"", NULL};
    log_kv(LOG_ERROR, kv, "redis: AUTH refused: %s", "WRONGPASS");
    log_debug("not printed at info");
}

static void test_log_text(void) {
    log_set_format(LOG_TEXT);
    const char *out = captured(some_lines);
    CHECK(strstr(out, " info  redis: command connection up to 127.0.0.1:6379\n") != NULL);
    CHECK(strstr(out, " error redis: AUTH refused: WRONGPASS redis=h:1 user=app \"x\"\n") != NULL);
    CHECK(strstr(out, "not printed") == NULL);
}

static void test_log_json(void) {
    log_set_format(LOG_JSON);
    const char *out = captured(some_lines);
    log_set_format(LOG_TEXT);
    int lines = 0;
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        CHECK(nl != NULL);
        if (!nl) break;
        cJSON *j = cJSON_ParseWithLength(p, (size_t)(nl - p));
        CHECK(j != NULL);
        cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "time");
        cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "level");
        cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
        cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "fields");
        CHECK(cJSON_IsString(t) && strlen(t->valuestring) == 24 && t->valuestring[23] == 'Z');
        CHECK(cJSON_IsString(lv) && cJSON_IsString(m) && cJSON_IsObject(f));
        cJSON *comp = cJSON_GetObjectItemCaseSensitive(f, "component");
        CHECK(cJSON_IsString(comp));
        if (lines == 0) {
            CHECK_EQ_STR(lv->valuestring, "info");
            CHECK_EQ_STR(m->valuestring, "redis: command connection up to 127.0.0.1:6379");
            CHECK_EQ_STR(comp->valuestring, "redis");
        } else if (lines == 1) {
            CHECK_EQ_STR(lv->valuestring, "warn");
            CHECK(strncmp(m->valuestring,
                          "a \"quoted\" back\\slash, a tab\there, a newline\nand a byte ",
                          55) == 0);
            CHECK_EQ_STR(comp->valuestring, "lockgate");
        } else if (lines == 2) {
            CHECK_EQ_STR(lv->valuestring, "error");
            CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(f, "redis")->valuestring, "h:1");
            CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(f, "user")->valuestring, "app \"x\"");
        }
        cJSON_Delete(j);
        lines++;
        p = nl + 1;
    }
    CHECK_EQ_INT(lines, 3);
}

static void test_log_parse(void) {
    CHECK_EQ_INT(log_parse_format("text"), LOG_TEXT);
    CHECK_EQ_INT(log_parse_format("JSON"), LOG_JSON);
    CHECK_EQ_INT(log_parse_format("xml"), -1);
    CHECK_EQ_INT(log_parse_format(""), -1);
}

int main(void) {
    RUN(test_log_text);
    RUN(test_log_json);
    RUN(test_log_parse);
    return check_summary("log");
}
