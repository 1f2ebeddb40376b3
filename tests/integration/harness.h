/* harness.h -- what integration tests need: a throwaway redis-server and
 * lockgate processes on free loopback ports, and HTTP through libcurl.
 *
 * Every process a test starts is registered and killed at exit (also when
 * the test fails or crashes through abort), and every temporary directory
 * removed.  Only 127.0.0.1 is ever used. */
#ifndef LOCKGATE_HARNESS_H
#define LOCKGATE_HARNESS_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/check.h"

#define H_CLUSTER_MAX 12 /* nodes of a test cluster */

struct h_redis {
    int port;     /* loopback port it listens on */
    pid_t pid;    /* its process, 0 when stopped */
    char dir[64]; /* its temporary working directory */
    int aof;      /* appendonly yes (persistence across restarts) */
    /* A Redis Cluster (h_cluster_start): port and pid are node 0's. */
    int cn;                    /* nodes, 0 when not a cluster */
    int cport[H_CLUSTER_MAX];  /* each node's port */
    pid_t cpid[H_CLUSTER_MAX]; /* each node's process, 0 when stopped */
};

struct h_gw {
    int port;            /* loopback port it serves on */
    pid_t pid;           /* its process, 0 when stopped */
    char log[96];        /* its stderr, kept in a file for failures */
    char redis_url[128]; /* --redis to use instead of the h_redis's, or ""
                            (for a cluster: the --redis-cluster seed) */
};

/* A TCP port that was free on 127.0.0.1 a moment ago. */
int h_free_port(void);

/* Starts redis-server (aof: with appendonly; extra: more redis-server
 * flags, or NULL) in a new directory on a free port, and waits until it
 * answers.  Every server gets --repl-diskless-sync-delay 0, so that a
 * replica syncs at once (Redis 7 with --save '' syncs disklessly, by
 * default after a 5 s delay). */
int h_redis_start(struct h_redis *r, int aof, const char *extra);
/* Starts a Redis Cluster on loopback, in one new directory: masters
 * masters with `replicas` replicas each (redis-server --cluster-enabled yes,
 * joined by redis-cli --cluster create), and waits until every node says
 * cluster_state:ok.  r->port is a node's (the gateway's seed). */
int h_cluster_start(struct h_redis *r, int masters, int replicas);
/* LOCKGATE_TEST_CLUSTER=1 in the environment: h_redis_start starts a
 * cluster of 3 masters with a replica each instead, h_redis_cli follows
 * redirects (-c), and gateways get --redis-cluster.  So the same suites run
 * against a cluster (make test-cluster). */
int h_cluster_mode(void);
/* The server h_redis_start and h_cluster_start run: "redis-server", or
 * "valkey-server" when LOCKGATE_TEST_SERVER=valkey (tests/run.sh re-runs
 * the suites in VALKEY_SUITES so; the harness then checks each server it
 * starts is Valkey).  Sentinels stay redis-sentinel. */
const char *h_server(void);
/* The path of the clock-shifting shim (timeshift.so, LD_PRELOAD into
 * redis-server) of this build: $BUILD/tests/, relative to $PWD unless
 * $BUILD is absolute. */
void h_timeshift_shim(char *out, size_t cap);
/* RUN, except in cluster mode, where the test is reported skipped: for
 * tests of what a cluster refuses at start or cannot do by design (a
 * database other than 0, one node's SCRIPT FLUSH). */
#define RUN_NOT_CLUSTER(fn)                                     \
    do {                                                        \
        if (h_cluster_mode())                                   \
            printf("ok - %s # skip: single Redis only\n", #fn); \
        else                                                    \
            RUN(fn);                                            \
    } while (0)
/* The node i of a cluster as a struct h_redis of its own (for h_redis_cli,
 * h_redis_kill on one node). */
struct h_redis h_cluster_node(struct h_redis *r, int i);

/* Starts it again on the same port and directory (after a stop or kill),
 * with these extra flags. */
int h_redis_restart(struct h_redis *r, const char *extra);
void h_redis_kill(struct h_redis *r); /* SIGKILL, no shutdown save */
void h_redis_stop(struct h_redis *r); /* SHUTDOWN, then remove dir */
/* Runs redis-cli with the arguments (a shell word list); returns its
 * trimmed output in a static buffer, or NULL. */
const char *h_redis_cli(struct h_redis *r, const char *args);

/* Starts build/lockgate (BUILD env picks the build dir) against r (or
 * g->redis_url when set), with extra flags (may be NULL), and waits for
 * its port.  env_prefix, if not
 * NULL, is put in front of the command (e.g. "faketime -f -1d"). */
int h_gw_start(struct h_gw *g, struct h_redis *r, const char *extra_flags);
int h_gw_start_env(struct h_gw *g, struct h_redis *r, const char *extra_flags,
                   const char *env_prefix);
/* SIGTERM and wait; returns the exit status, or -1 if it took over
 * timeout_ms (then it is killed). */
int h_gw_stop(struct h_gw *g, int timeout_ms);
void h_gw_kill(struct h_gw *g); /* SIGKILL */
/* SIGSTOP to pid, and waits (up to 2 s) until every one of its threads is
 * stopped: kill(2) returns before a busy process has stopped, and a test
 * that freezes a process to fix the order of events must not have it run
 * on for a few ms.  Returns 0 once stopped, -1 otherwise. */
int h_freeze(pid_t pid);

struct h_resp {
    long status;        /* HTTP status, 0 when the request failed */
    char *body;         /* body, NUL-terminated */
    size_t body_len;    /* its length */
    char headers[4096]; /* raw response headers */
    cJSON *json;        /* parsed body when it is JSON, else NULL */
    double seconds;     /* total time the request took */
};

/* Sends method url with an optional Lock-Token and body; extra_header may
 * be NULL or "Name: value".  The caller frees with h_resp_free. */
struct h_resp h_http(const char *method, int port, const char *path, const char *token,
                     const char *body, const char *extra_header);
void h_resp_free(struct h_resp *r);

/* A response header's value (case-insensitive name) in a static buffer. */
const char *h_header(struct h_resp *r, const char *name);

/* Member of the JSON body: number (as long long), string or bool. */
long long h_jint(struct h_resp *r, const char *key);
const char *h_jstr(struct h_resp *r, const char *key);
const char *h_jcode(struct h_resp *r); /* problem+json "code" */
/* The answer's Lock-Token header, or "". */
const char *h_token(struct h_resp *r);

/* Sends raw bytes on a new connection and returns what came back (up to
 * cap bytes in out, NUL-terminated) within timeout_ms. */
/* Raises this process's descriptor limit to want (or the hard limit);
 * gateways started afterwards inherit it. */
void h_raise_nofile(unsigned long want);
/* A TCP connection to 127.0.0.1:port, or -1. */
int h_connect(int port);
size_t h_raw(int port, const void *data, size_t len, char *out, size_t cap, int timeout_ms);

/* Runs cmd (through sh -c, in its own process group) with its output
 * appended to logfile (NULL: none); the process is killed at exit like
 * every other the harness starts.  Returns its pid, or -1. */
pid_t h_spawn(const char *cmd, const char *logfile);

/* Milliseconds since an arbitrary start, monotonic. */
long long h_now_ms(void);
void h_sleep_ms(int ms);

/* For a gateway started with an env_prefix that forks rather than execs
 * (faketime(1) does: it runs the gateway as its child and does not pass
 * signals on).  h_gw_stop_tree sends SIGTERM to the wrapper's children (to
 * the process itself when it has none) and waits for the wrapper to exit:
 * the gateway's exit status, or -1 after timeout_ms (then it kills the tree).
 * h_gw_kill_tree sends SIGKILL to the whole process group. */
int h_gw_stop_tree(struct h_gw *g, int timeout_ms);
void h_gw_kill_tree(struct h_gw *g);


/* ==========================================================================
 * Replication, Sentinel and quorum helpers (test_sentinel, test_quorum,
 * test_overlap).  A sentinel is a struct h_redis too: h_redis_cli,
 * h_redis_kill and h_redis_stop work on it (h_redis_restart does not: it
 * would start a redis-server).
 * ======================================================================= */

/* Starts r as a replica of master and waits (up to 15 s) until its link
 * is up, it has synced, and the master counts it as online. */
int h_replica_start(struct h_redis *r, struct h_redis *master);
/* Waits until r says master_link_status:up; 0, or -1 after timeout_ms. */
int h_replica_wait_link(struct h_redis *r, int timeout_ms);
/* Starts redis-sentinel watching master under `name` (quorum, down-after
 * and failover-timeout as given) and waits until it answers PING. */
int h_sentinel_start(struct h_redis *s, struct h_redis *master, const char *name, int quorum,
                     int down_after_ms, int failover_timeout_ms);
/* Waits until sentinel s knows `others` other sentinels and `replicas`
 * replicas of `name`; 0, or -1 after timeout_ms. */
int h_sentinel_wait_ready(struct h_redis *s, const char *name, int others, int replicas,
                          int timeout_ms);
/* The port of the master sentinel s names for `name`, or -1. */
int h_sentinel_master_port(struct h_redis *s, const char *name);
/* A field of `INFO <section>` (e.g. "master_repl_offset"), as a number,
 * or -1. */
long long h_redis_info_int(struct h_redis *r, const char *section, const char *field);

/* A keep-alive HTTP client for one thread (a new connection per request
 * would spend thousands of loopback ports in TIME_WAIT): the same client
 * as h_http, on a connection kept between requests.  h_client_do returns
 * the status (0: no answer) and keeps the whole answer in last, until the
 * next request or h_client_free. */
struct h_client {
    void *curl;         /* CURL *, reused: keeps its connection */
    struct h_resp last; /* the last answer */
};
void h_client_init(struct h_client *cl, long timeout_ms);
void h_client_free(struct h_client *cl);
long h_client_do(struct h_client *cl, const char *method, int port, const char *path,
                 const char *token, const char *body);
/* A TCP relay on loopback, run by a thread of the test: each connection it
 * accepts on `port` is forwarded to the target port.  h_relay_hold stops
 * forwarding every connection it has, in both directions, without closing
 * any (as a NAT that forgot the flows, or a replication stream held back):
 * their bytes are neither read nor passed on, and are lost when the relay
 * or an end closes.  h_relay_retarget closes every connection it has and
 * sends new ones to another port (a virtual address moved after a
 * promotion).  Connections made after either are forwarded as usual.
 * h_relay_hold_on(r, s): the first bytes a client sends that contain s
 * (one read's worth: a command as the client wrote it) are not passed on,
 * and that connection is held as h_relay_hold holds it; once.
 * h_relay_watch(r, k, s): from now on r->watched[k] counts the reads from
 * clients (one read's worth, as with hold_on) that contain s, passed on as
 * usual: a test learns that a command has left the client (and reached
 * the target's socket, even a stopped target's). */
#define H_RELAY_MAX   64
#define H_RELAY_WATCH 4
struct h_relay {
    int listen_fd, port;
    volatile int target;
    int a[H_RELAY_MAX], b[H_RELAY_MAX]; /* accepted side, target side; -1 free */
    int held[H_RELAY_MAX];
    int n;
    volatile int hold, drop, stop;
    /* h_relay_hold_on's s, NULL once it was seen */
    const char *volatile hold_on;
    const char *volatile watch[H_RELAY_WATCH]; /* h_relay_watch's strings, or NULL */
    volatile int watched[H_RELAY_WATCH];       /* reads that contained each */
    /* set before connections come: the relay's socket to the target takes
     * the least receive buffer, so that once held it stops taking the
     * target's bytes after ~1 KiB (its TCP window closes), as a host gone
     * silent soon does */
    int small_rcvbuf;
    pthread_t th;
};
int h_relay_start(struct h_relay *r, int target_port);
void h_relay_hold(struct h_relay *r);
void h_relay_hold_on(struct h_relay *r, const char *s);
void h_relay_watch(struct h_relay *r, int k, const char *s);
void h_relay_retarget(struct h_relay *r, int target_port);
void h_relay_stop(struct h_relay *r);

/* Starts the gateway retrying on fresh ports like the suites do (3 tries). */
int h_gw_up(struct h_gw *g, struct h_redis *r, const char *flags);
/* A counter or gauge from /metrics, or -1. */
long long h_metric(struct h_gw *g, const char *name);
/* Polls /readyz on port until it answers 200: 0, or -1 after timeout_ms. */
int h_wait_ready(int port, int timeout_ms);
/* How many lines of the gateway's log contain needle. */
int h_log_count(struct h_gw *g, const char *needle);
/* The lines of the file at path that contain needle (0 when it is missing). */
int h_file_count(const char *path, const char *needle);

/* Event streams read through curl -N, each one's output in a file named
 * OUT under one directory (h_out_dir names it): what it holds so far, as
 * text valid until the next h_out_* call (a missing file reads as ""). */
void h_out_dir(const char *dir);
const char *h_out_text(const char *out);
/* Milliseconds until out contains needle, or -1 after timeout_ms. */
long long h_out_wait(const char *out, const char *needle, int timeout_ms);
/* How many times out contains needle. */
int h_out_count(const char *out, const char *needle);
/* Waits until out contains needle n times; how many times it does then. */
int h_out_wait_count(const char *out, const char *needle, int n, int timeout_ms);
/* Whether out holds the n needles in this order, each after the last; the
 * needles are rows of stride bytes (char want[N][stride]).  The first one
 * missing is printed. */
int h_out_in_order(const char *out, const char *needles, size_t stride, int n);
/* The value of out's n-th (from 1) "id: " line into id (48 bytes), or "". */
void h_out_nth_id(const char *out, int n, char *id);
/* An election observer's `event: leader` values in out, in order, joined
 * by ',' into seen. */
void h_out_leaders(const char *out, char *seen, size_t cap);
/* kill -9 and wait: for the curl a test started with h_spawn. */
void h_reap(pid_t pid);
#endif
