/* config.h -- the gateway's settings: defaults, then environment, then flags.
 *
 * Every setting has a flag and a LOCKGATE_* variable; a flag wins over the
 * environment.  `lockgate --help` prints the list (config_usage). */
#ifndef LOCKGATE_CONFIG_H
#define LOCKGATE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "server/origin.h"

#define GW_PREFIX_MAX    64
#define GW_MAX_SENTINELS 8
#define GW_MAX_NODES     9  /* quorum mode: independent Redis masters */
#define GW_MAX_SEEDS     16 /* cluster mode: seed nodes named at start */

struct gw_endpoint {
    char host[256]; /* host name or address */
    int port;       /* TCP port */
    int tls;        /* rediss://: TLS to it (server/redis_tls.h) */
};

struct gw_config {
    char listen_host[256];                          /* address to bind, e.g. "127.0.0.1" */
    int listen_port;                                /* TCP port to serve HTTP on */
    char redis_host[256];                           /* Redis host name or address */
    int redis_port;                                 /* Redis port */
    char redis_user[128];                           /* ACL user for AUTH, "" for none */
    char redis_password[256];                       /* AUTH password, "" for none */
    char redis_password_file[4096];                 /* the password's file, "" for none */
    int redis_tls;                                  /* the URL is rediss:// */
    int redis_db;                                   /* SELECT index, 0 by default */
    char key_prefix[GW_PREFIX_MAX + 1];             /* prefix of every key, "lockgate:" */
    int log_level;                                  /* enum log_level */
    int log_format;                                 /* enum log_format: text or json */
    int threads;                                    /* worker threads (--workers) */
    int redis_timeout_ms;                           /* a command not answered by then fails */
    int max_connections;                            /* concurrent HTTP connections accepted */
    int connection_memory_kib;                      /* libmicrohttpd's buffer per connection */
    int64_t id_epoch;                               /* unix seconds where id time starts */
    struct gw_endpoint sentinels[GW_MAX_SENTINELS]; /* Sentinel mode when any */
    int nsentinels;                                 /* used entries of sentinels */
    char sentinel_master[128];                      /* the master's name at the sentinels */
    struct gw_endpoint nodes[GW_MAX_NODES];         /* every --redis; [0] is redis_host:port */
    int nnodes;                                     /* >= 3: quorum mode over independent masters */
    int quorum;                                     /* nodes that must agree (default majority) */
    int min_replicas_ack;                           /* WAIT for this many replicas after a write */
    int replica_ack_timeout_ms;                     /* WAIT's timeout */
    int liveness_ttl_ms;                            /* TTL of the gateway's liveness key */
    int stream_heartbeat_ms;                        /* comment lines on an event stream */
    int stream_user_timeout_ms;                     /* TCP_USER_TIMEOUT of a stream's socket */
    int id_namespaces;                              /* id namespaces live at once (idtable) */
    int id_jump_s;                                  /* id lease step after a new or lost mark */
    struct gw_endpoint cluster[GW_MAX_SEEDS]; /* --redis-cluster seeds: cluster mode when any */
    int ncluster;                             /* used entries of cluster */
    char auth_file[4096];                     /* --auth-file: API keys, "" for none */
    char tls_cert[4096];                      /* --tls-cert: PEM chain, "" for plain HTTP */
    char tls_key[4096];                       /* --tls-key: its PEM private key */
    char tls_client_ca[4096];                 /* --tls-client-ca: mutual TLS, "" off */
    int max_connections_per_ip;               /* 0: unlimited */
    long long max_lease_ms;                   /* the longest lease, session or extension
                                                 granted (server/lossguard.h) */
    int accept_eviction_risk;                 /* 1: grant even where Redis may evict
                                                 (server/memguard.h) */
    char cors_origins[ORIGIN_MAX][ORIGIN_MAX_LEN + 1]; /* --cors-origin (origin.h) */
    int ncors_origins;                                 /* used entries of cors_origins */
    char redis_tls_ca[4096];         /* --redis-tls-ca: trust these, "" the system's */
    char redis_tls_cert[4096];       /* --redis-tls-cert: client certificate, "" none */
    char redis_tls_key[4096];        /* --redis-tls-key: its private key */
    char redis_tls_server_name[256]; /* --redis-tls-server-name: verified and SNI */
    int redis_tls_insecure;          /* --redis-tls-insecure: verify nothing */
    int sentinel_master_tls;         /* --sentinel-master-tls: TLS to the master the
                                         sentinels name (-1: as the sentinels) */
    int header_timeout_ms;           /* request line and headers must arrive within (conns.h) */
    int body_timeout_ms;             /* a body must arrive within, after its headers */
    int shutdown_delay_ms;           /* SIGTERM: served with /readyz failing this long first */
};

/* Fills cfg from defaults, the environment and argv.  Returns 0 when the
 * server should run, 1 when --help or --version was printed (exit 0), and
 * -1 with a one-line reason in err on a bad setting (exit 2). */
int config_load(struct gw_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Parses "redis[s]://[[user]:password@]host[:port][/db]" into cfg's redis
 * fields.  The user and the password may be percent-encoded (a password
 * with '/' or '%'); the last '@' ends them, so a plain '@' in a password
 * works too.  "redis://password@host" (no colon) is a password, as before;
 * "redis://user:@host" a user whose password is in a file
 * (--redis-password-file, checked by config_load).
 * rediss:// asks for TLS: redis_tls is set to 1 (0 for redis://).
 * Returns 0, or -1 when the URL is not of that form. */
int config_parse_redis_url(struct gw_config *cfg, const char *url);

/* Parses "host:port", "redis://host:port" or "rediss://host:port" (TLS)
 * into an endpoint; returns 0 or -1. */
int config_parse_endpoint(struct gw_endpoint *e, const char *s);

/* Parses "host:port" or "[v6]:port"; returns 0 or -1. */
int config_parse_listen(struct gw_config *cfg, const char *s);

/* 1 when cfg listens on a loopback address only (127.0.0.0/8, ::1,
 * localhost). */
int config_listen_is_loopback(const struct gw_config *cfg);

/* Parses unix seconds or "YYYY-MM-DDTHH:MM:SSZ"; returns 0 or -1. */
int config_parse_epoch(const char *s, int64_t *out);

#endif
