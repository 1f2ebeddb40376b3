/* session.c -- see session.h. */
#include "cli/session.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/http.h"
#include "cli/requests.h"
#include "common/alloc.h"
#include "common/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

/* FILE's token into tok ("" when empty or malformed). */
static void read_token(int fd, char tok[TOKEN_MAX_LEN + 1]) {
    ssize_t n = pread(fd, tok, TOKEN_MAX_LEN, 0);
    tok[n > 0 ? n : 0] = '\0';
    tok[strcspn(tok, "\r\n")] = '\0';
    if (!token_valid(tok)) tok[0] = '\0';
}

static void write_token(int fd, const char *tok) {
    if (ftruncate(fd, 0) < 0 || pwrite(fd, tok, strlen(tok), 0) < 0 ||
        pwrite(fd, "\n", 1, (off_t)strlen(tok)) < 0)
        ctl_say("warning: cannot write the session file: %s", strerror(errno));
}

/* One request run to its end; its outcome, c kept for the caller. */
static enum outcome request(struct call *c, const char *method, const char *path, cJSON *body) {
    call_start(c, method, path, NULL, body, CTL_REQUEST_MS);
    while (!c->done) http_wait(1000);
    return call_outcome(c);
}

/* Starts the renewer detached (double fork: it is nobody's child to wait
 * for, and outlives this run). */
static void spawn_renewer(const char *file, const char *tok, long long ttl) {
    char ttl_s[24];
    snprintf(ttl_s, sizeof ttl_s, "%lld", ttl);
    pid_t pid = fork();
    if (pid < 0) {
        ctl_say("warning: cannot start the session renewer: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        if (fork() != 0) _exit(0);
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            if (!ctl_verbose) dup2(null, 2);
        }
        char *argv[] = {"lockctl", "_session-renewer", ctl_url, (char *)file, (char *)tok, ttl_s,
                        NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

int session_join(const char *file, long long ttl) {
    char lockname[4096];
    snprintf(lockname, sizeof lockname, "%s.lock", file);
    int gate = open(lockname, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (gate < 0 || fd < 0) {
        ctl_say("cannot open session file '%s': %s", file, strerror(errno));
        return CTL_EXIT_USAGE;
    }
    while (flock(gate, LOCK_EX) < 0 && errno == EINTR) {}
    char tok[TOKEN_MAX_LEN + 1];
    read_token(fd, tok);
    int rc = 0;
    struct call c;
    if (tok[0]) {
        char path[TOKEN_MAX_LEN + 32];
        snprintf(path, sizeof path, "/v1/sessions/%s", tok);
        enum outcome out = request(&c, "GET", path, NULL);
        if (out != OUT_OK) tok[0] = '\0'; /* ended: start another */
        if (out == OUT_DOWN) rc = call_report(&c, "read the session");
        call_free(&c);
    }
    if (!tok[0] && !rc) {
        cJSON *b = alloc_check(cJSON_CreateObject());
        add_int(b, "ttl_ms", ttl);
        if (request(&c, "POST", "/v1/sessions", b) == OUT_OK && jstr(c.json, "token")) {
            snprintf(tok, sizeof tok, "%s", jstr(c.json, "token"));
            write_token(fd, tok);
            spawn_renewer(file, tok, ttl);
            if (ctl_verbose) ctl_say("started session %s (ttl %lld ms)", tok, ttl);
        } else {
            rc = call_report(&c, "start a session");
        }
        call_free(&c);
    }
    if (!rc) {
        while (flock(fd, LOCK_SH) < 0 && errno == EINTR) {}
        snprintf(ctl_session, sizeof ctl_session, "%s", tok);
    }
    flock(gate, LOCK_UN);
    close(gate);
    if (rc) close(fd);
    return rc; /* fd stays open (and locked) until the run ends */
}

int session_renewer(int argc, char **argv) {
    if (argc != 6) return CTL_EXIT_USAGE;
    options_set_url(argv[2]);
    const char *file = argv[3], *tok = argv[4];
    long long ttl = atoll(argv[5]);
    if (ttl < 100) ttl = 100;
    char lockname[4096], path[TOKEN_MAX_LEN + 32];
    snprintf(lockname, sizeof lockname, "%s.lock", file);
    snprintf(path, sizeof path, "/v1/sessions/%s", tok);
    int gate = open(lockname, O_RDWR | O_CLOEXEC);
    int fd = open(file, O_RDWR | O_CLOEXEC);
    if (gate < 0 || fd < 0) return CTL_EXIT_INTERNAL;
    long long lease_end = now_ms() + ttl;
    for (;;) {
        long long pause = ttl / 3;
        usleep((useconds_t)(pause * 1000));
        while (flock(gate, LOCK_EX) < 0 && errno == EINTR) {}
        char cur[TOKEN_MAX_LEN + 1];
        read_token(fd, cur);
        if (strcmp(cur, tok) != 0) break; /* another session took the file */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            /* No run left: end the session (its holds with it). */
            struct call c;
            request(&c, "DELETE", path, NULL);
            call_free(&c);
            write_token(fd, "");
            break;
        }
        flock(gate, LOCK_UN);
        struct call c;
        long long sent = now_ms();
        enum outcome out = request(&c, "PATCH", path, NULL);
        call_free(&c);
        if (out == OUT_OK) {
            lease_end = sent + ttl;
        } else if (out != OUT_DOWN || now_ms() >= lease_end) {
            break; /* ended or expired: the runs find out by themselves */
        }
    }
    flock(gate, LOCK_UN);
    return 0;
}
