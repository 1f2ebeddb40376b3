/* test_conns.c -- the deadlines of slow connections (server/conns.c):
 * each phase's list in due order, a sweep that shuts down exactly the
 * connections past due and says when the next falls due, and phases
 * changed and forgotten.  Socket pairs stand in for clients. */
#include "server/conns.h"
#include "tests/check.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* 1 when the peer of our end sees the end of the stream (we were shut). */
static int was_shut(int peer) {
    char c;
    return recv(peer, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_sweep_in_due_order(void) {
    struct conn_set s;
    conns_init(&s, 1000, 500, 60000, 60000);
    int sv[4][2];
    struct conn *c[4];
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        c[i] = conns_start(&s, sv[i][0], NULL, 100 * i); /* headers due 1000 + 100 i */
    }
    conns_enter(&s, c[1], CONN_BODY, 200);     /* due 700 */
    conns_enter(&s, c[2], CONN_HANDLING, 300); /* none */
    int64_t next;
    CHECK_EQ_INT(conns_sweep(&s, 699, &next), 0);
    CHECK_EQ_INT(next, 700);
    CHECK_EQ_INT(conns_sweep(&s, 1000, &next), 2); /* c1 (body) and c0 (headers) */
    CHECK(was_shut(sv[0][1]) && was_shut(sv[1][1]));
    CHECK(!was_shut(sv[2][1]) && !was_shut(sv[3][1]));
    CHECK_EQ_INT(next, 1300);
    conns_enter(&s, c[3], CONN_NEXT, 1100); /* due 61100 */
    CHECK_EQ_INT(conns_sweep(&s, 5000, &next), 0);
    CHECK_EQ_INT(next, 61100);
    conns_forget(&s, c[3]);
    CHECK_EQ_INT(conns_sweep(&s, 100000, &next), 0);
    CHECK(next == INT64_MAX && !was_shut(sv[3][1]));
    for (int i = 0; i < 4; i++) {
        conns_forget(&s, c[i]);
        free(c[i]);
        close(sv[i][0]);
        close(sv[i][1]);
    }
}

int main(void) {
    RUN(test_sweep_in_due_order);
    return check_summary("conns");
}
