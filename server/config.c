/* config.c -- see config.h. */
#include "server/config.h"
#include "server/log.h"
#include "common/decimal.h"
#include "idgen/idtable.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#define DEFAULT_EPOCH 1704067200 /* 2024-01-01T00:00:00Z */

static void usage(void) {
    printf("usage: lockgate [options]\n"
           "\n"
           "HTTP gateway for distributed locks, semaphores and unique ids over Redis.\n"
           "Each option may also be set by the environment variable in brackets;\n"
           "an option on the command line wins.\n"
           "\n"
           "  --listen HOST:PORT     address to serve HTTP on [LOCKGATE_LISTEN]\n"
           "                         (default 127.0.0.1:8080)\n"
           "  --redis URL            redis://[[user]:password@]host[:port][/db]\n"
           "                         [LOCKGATE_REDIS]; with a user, AUTH user password;\n"
           "                         rediss://... for TLS (see --redis-tls-ca)\n"
           "                         (default redis://127.0.0.1:6379)\n"
           "                         Give it 3 or more times (or a comma-separated list)\n"
           "                         for quorum mode over independent masters (Redlock)\n"
           "  --quorum N             masters that must agree in quorum mode\n"
           "                         [LOCKGATE_QUORUM] (default a majority)\n"
           "  --redis-cluster HOST:PORT  a node of a Redis Cluster (a seed: the gateway\n"
           "                         asks it for the slot map); repeat or comma-separate\n"
           "                         for several.  A seed may be a URL,\n"
           "                         redis[s]://[[user]:password@]host:port, for AUTH\n"
           "                         (rediss://: TLS to every node) [LOCKGATE_REDIS_CLUSTER]\n"
           "  --redis-tls-ca PATH    TLS to Redis (rediss://): trust the CAs of this PEM\n"
           "                         file (default: the system's trust store)\n"
           "                         [LOCKGATE_REDIS_TLS_CA]\n"
           "  --redis-tls-cert PATH  mutual TLS to Redis: this PEM client certificate\n"
           "                         [LOCKGATE_REDIS_TLS_CERT]\n"
           "  --redis-tls-key PATH   and its PEM private key [LOCKGATE_REDIS_TLS_KEY]\n"
           "  --redis-tls-server-name NAME  the name Redis's certificate must carry, also\n"
           "                         sent as SNI (default: the host as connected to; an\n"
           "                         address is matched against the IP SANs)\n"
           "                         [LOCKGATE_REDIS_TLS_SERVER_NAME]\n"
           "  --redis-tls-insecure   do not verify Redis's certificate at all (chain or\n"
           "                         name; logged at every start)\n"
           "                         [LOCKGATE_REDIS_TLS_INSECURE=1]\n"
           "  --redis-password-file PATH  the Redis password (one line) from this file,\n"
           "                         read at start, on SIGHUP and before each new Redis\n"
           "                         connection; the URL then names at most the user,\n"
           "                         redis://USER:@host [LOCKGATE_REDIS_PASSWORD_FILE]\n"
           "  --key-prefix TEXT      prefix of every Redis key [LOCKGATE_KEY_PREFIX]\n"
           "                         (default lockgate:)\n"
           "  --workers N            worker threads, each one event loop serving its share\n"
           "                         of the connections with its own Redis connections\n"
           "                         [LOCKGATE_WORKERS] (default: the online cores, 1-64;\n"
           "                         --threads and LOCKGATE_THREADS are older names)\n"
           "  --redis-timeout-ms MS  fail a Redis command after MS [LOCKGATE_REDIS_TIMEOUT_MS]\n"
           "                         (default 2000)\n"
           "  --max-connections N    concurrent HTTP connections [LOCKGATE_MAX_CONNECTIONS]\n"
           "                         (default 20000)\n"
           "  --connection-memory-kib N  buffer per HTTP connection for the request line,\n"
           "                         headers and response headers; a longer request line\n"
           "                         gets 414, larger headers 431.  A waiting request keeps\n"
           "                         one, so it sets the\n"
           "                         memory 10,000 waiters take [LOCKGATE_CONNECTION_MEMORY_KIB]\n"
           "                         (3-1024, default 4: request headers up to about 3.2 KiB;\n"
           "                         3: about 2.2 KiB, and 1 KiB less per connection)\n"
           "  --max-lease-ms MS      the longest ttl_ms a lock, permit or session may ask for;\n"
           "                         after a Redis master lost its data no lock is granted\n"
           "                         for this long [LOCKGATE_MAX_LEASE_MS] (default 86400000)\n"
           "  --accept-eviction-risk 1  grant locks even where a Redis master has a\n"
           "                         maxmemory-policy that may evict them (logged at every\n"
           "                         start) [LOCKGATE_ACCEPT_EVICTION_RISK] (default 0)\n"
           "  --id-epoch WHEN        unix seconds or YYYY-MM-DDTHH:MM:SSZ where id time\n"
           "                         starts [LOCKGATE_ID_EPOCH] (default 2024-01-01T00:00:00Z)\n"
           "  --id-jump-s S          after a Redis restart or failover (a new run_id) or\n"
           "                         for a mark it lacks, lease ids S seconds ahead of its\n"
           "                         clock and mark, past any it may have lost; more than\n"
           "                         the Redis hosts' clocks can differ\n"
           "                         [LOCKGATE_ID_JUMP_S] (default 10, 1-3600)\n"
           "  --id-namespaces N      id namespaces kept live at once; beyond that the least\n"
           "                         recently used is evicted (about 0.6 KiB each)\n"
           "                         [LOCKGATE_ID_NAMESPACES] (default 16384, 16-4194304)\n"
           "  --sentinel HOST:PORT   a Redis Sentinel to ask for the master; repeat for\n"
           "                         several [LOCKGATE_SENTINELS, comma-separated];\n"
           "                         rediss://HOST:PORT for TLS to the sentinel\n"
           "  --sentinel-master-tls 0|1  TLS to the master the sentinels name\n"
           "                         [LOCKGATE_SENTINEL_MASTER_TLS] (default: 1 when the\n"
           "                         sentinels are rediss://)\n"
           "  --sentinel-master NAME the master's name at the sentinels\n"
           "                         [LOCKGATE_SENTINEL_MASTER] (default mymaster)\n"
           "  --min-replicas-ack N   after an acquire, extend or id lease, WAIT until N\n"
           "                         replicas have it, else answer 503 and give it back\n"
           "                         [LOCKGATE_MIN_REPLICAS_ACK] (default 0)\n"
           "  --replica-ack-timeout-ms MS  how long that WAIT may take\n"
           "                         [LOCKGATE_REPLICA_ACK_TIMEOUT_MS] (default 500)\n"
           "  --liveness-ttl-ms MS   TTL of this gateway's liveness key, renewed every\n"
           "                         third of it: a fair waiter of a gateway that died or\n"
           "                         lost Redis stops holding up its queue MS after that\n"
           "                         [LOCKGATE_LIVENESS_TTL_MS] (300-300000, default 2000)\n"
           "  --stream-heartbeat-ms MS  a comment line on every event stream (a hold\n"
           "                         bound to its connection) this often, so proxies\n"
           "                         keep it [LOCKGATE_STREAM_HEARTBEAT_MS]\n"
           "                         (10-300000, default 15000)\n"
           "  --stream-user-timeout-ms MS  TCP_USER_TIMEOUT of a stream's socket: a\n"
           "                         client host that stops acknowledging is cut off\n"
           "                         (its hold released) within heartbeat + this\n"
           "                         [LOCKGATE_STREAM_USER_TIMEOUT_MS]\n"
           "                         (100-600000, default 20000)\n"
           "  --auth-file PATH      API keys and their grants (JSON, docs/security.md);\n"
           "                         without it anyone who reaches the port\n"
           "                         may do anything [LOCKGATE_AUTH_FILE]; SIGHUP rereads it\n"
           "  --tls-cert PATH       serve HTTPS with this PEM certificate (chain)\n"
           "                         [LOCKGATE_TLS_CERT]; SIGHUP rereads it and the key\n"
           "  --tls-key PATH        its PEM private key [LOCKGATE_TLS_KEY]\n"
           "  --tls-client-ca PATH  mutual TLS: require a client certificate signed by\n"
           "                         this CA [LOCKGATE_TLS_CLIENT_CA]\n"
           "  --max-connections-per-ip N  connections one client address may hold\n"
           "                         [LOCKGATE_MAX_CONNECTIONS_PER_IP] (default 0: unlimited)\n"
           "  --cors-origin ORIGIN   let pages of this origin (http[s]://host[:port]) call\n"
           "                         the API from a browser, with CORS; repeatable, at most\n"
           "                         16 [LOCKGATE_CORS_ORIGIN, comma-separated]; any other\n"
           "                         Origin but the gateway's own is refused (403)\n"
           "  --header-timeout-ms MS a client must send its request line and headers\n"
           "                         within MS of connecting, else it is disconnected\n"
           "                         [LOCKGATE_HEADER_TIMEOUT_MS] (100-600000, default 10000)\n"
           "  --body-timeout-ms MS   and a body within MS of its headers\n"
           "                         [LOCKGATE_BODY_TIMEOUT_MS] (100-600000, default 10000)\n"
           "  --shutdown-delay-ms MS on SIGTERM, /readyz fails at once and requests are\n"
           "                         still served for MS (load balancers stop sending\n"
           "                         first); then waiters are answered 503 and what is in\n"
           "                         flight finishes [LOCKGATE_SHUTDOWN_DELAY_MS]\n"
           "                         (0-60000, default 5000; SIGINT stops without it)\n"
           "  --log-level LEVEL      debug, info, warn or error [LOCKGATE_LOG_LEVEL]\n"
           "                         (default info)\n"
           "  --log-format FORMAT    text (the default) or json: one JSON object per line\n"
           "                         with time, level, message and fields\n"
           "                         [LOCKGATE_LOG_FORMAT]\n"
           "  --help                 print this and exit\n"
           "  --version              print the version and exit\n");
}

/* A whole string of digits within [lo, hi] (decimal.h). */
static int parse_digits(const char *s, long long lo, long long hi, long long *out) {
    return decimal_parse(s, strlen(s), lo, hi, out);
}

int config_parse_endpoint(struct gw_endpoint *e, const char *s) {
    struct gw_config tmp;
    int tls = strncmp(s, "rediss://", 9) == 0;
    if (tls)
        s += 9;
    else if (strncmp(s, "redis://", 8) == 0)
        s += 8;
    if (config_parse_listen(&tmp, s) < 0 || tmp.listen_port == 0) return -1;
    if (strpbrk(tmp.listen_host, "@/")) return -1; /* no login or path here */
    strcpy(e->host, tmp.listen_host);
    e->port = tmp.listen_port;
    e->tls = tls;
    return 0;
}

/* Appends each comma-separated Redis URL of list to the nodes; the first
 * one also sets the user, password and database every node uses. */
static int add_nodes(struct gw_config *cfg, const char *list) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        struct gw_config tmp = *cfg;
        if (cfg->nnodes == GW_MAX_NODES || config_parse_redis_url(&tmp, tok) < 0) return -1;
        if (cfg->nnodes == 0) {
            strcpy(cfg->redis_host, tmp.redis_host);
            cfg->redis_port = tmp.redis_port;
            strcpy(cfg->redis_user, tmp.redis_user);
            strcpy(cfg->redis_password, tmp.redis_password);
            cfg->redis_db = tmp.redis_db;
            cfg->redis_tls = tmp.redis_tls;
        }
        strcpy(cfg->nodes[cfg->nnodes].host, tmp.redis_host);
        cfg->nodes[cfg->nnodes].tls = tmp.redis_tls;
        cfg->nodes[cfg->nnodes++].port = tmp.redis_port;
    }
    return 0;
}

/* Appends each comma-separated seed of list to the cluster's: HOST:PORT,
 * or a Redis URL whose user and password (the same for every node, and for
 * the nodes the slot map names) are kept. */
static int add_cluster_seeds(struct gw_config *cfg, const char *list) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (cfg->ncluster == GW_MAX_SEEDS) return -1;
        struct gw_endpoint *e = &cfg->cluster[cfg->ncluster];
        if (strncmp(tok, "redis://", 8) == 0 || strncmp(tok, "rediss://", 9) == 0) {
            struct gw_config tmp = *cfg;
            if (config_parse_redis_url(&tmp, tok) < 0 || tmp.redis_db != 0) return -1;
            strcpy(e->host, tmp.redis_host);
            e->port = tmp.redis_port;
            e->tls = tmp.redis_tls;
            if (tmp.redis_password[0] || tmp.redis_user[0]) {
                strcpy(cfg->redis_user, tmp.redis_user);
                strcpy(cfg->redis_password, tmp.redis_password);
            }
        } else if (config_parse_endpoint(e, tok) < 0) {
            return -1;
        }
        cfg->ncluster++;
    }
    return 0;
}

/* Appends each comma-separated endpoint of list to the sentinels. */
static int add_sentinels(struct gw_config *cfg, const char *list) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (cfg->nsentinels == GW_MAX_SENTINELS ||
            config_parse_endpoint(&cfg->sentinels[cfg->nsentinels], tok) < 0)
            return -1;
        cfg->nsentinels++;
    }
    return 0;
}

int config_parse_listen(struct gw_config *cfg, const char *s) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return -1;
    const char *host = s;
    size_t hlen = (size_t)(colon - s);
    if (host[0] == '[' && hlen >= 2 && host[hlen - 1] == ']') {
        host++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof cfg->listen_host) return -1;
    long long port;
    if (parse_digits(colon + 1, 0, 65535, &port) < 0) return -1;
    memcpy(cfg->listen_host, host, hlen);
    cfg->listen_host[hlen] = '\0';
    cfg->listen_port = (int)port;
    return 0;
}

/* Percent-decodes the len bytes at s into out (cap bytes with the NUL);
 * -1 on a bad escape, a NUL byte or no room. */
static int decode_userinfo(const char *s, size_t len, char *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            unsigned v = 0;
            for (size_t k = i + 1; k < i + 3; k++) {
                int h = k < len ? s[k] : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0) return -1;
                v = v * 16 + (unsigned)d;
            }
            c = (int)v;
            i += 2;
        }
        if (c == 0 || n + 1 >= cap) return -1;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

int config_parse_redis_url(struct gw_config *cfg, const char *url) {
    const char *p = url;
    int tls = strncmp(p, "rediss://", 9) == 0;
    if (!tls && strncmp(p, "redis://", 8) != 0) return -1;
    p += tls ? 9 : 8;
    cfg->redis_tls = tls;
    cfg->redis_user[0] = '\0';
    cfg->redis_password[0] = '\0';
    cfg->redis_db = 0;
    const char *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        if (colon &&
            decode_userinfo(p, (size_t)(colon - p), cfg->redis_user, sizeof cfg->redis_user) < 0)
            return -1;
        if (decode_userinfo(pw, (size_t)(at - pw), cfg->redis_password,
                            sizeof cfg->redis_password) < 0)
            return -1;
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    const char *hostend = slash ? slash : p + strlen(p);
    const char *colon = memchr(p, ':', (size_t)(hostend - p));
    const char *hend = colon ? colon : hostend;
    size_t hlen = (size_t)(hend - p);
    if (hlen == 0 || hlen >= sizeof cfg->redis_host) return -1;
    memcpy(cfg->redis_host, p, hlen);
    cfg->redis_host[hlen] = '\0';
    cfg->redis_port = 6379;
    long long v;
    if (colon) {
        if (decimal_parse(colon + 1, (size_t)(hostend - colon - 1), 1, 65535, &v) < 0) return -1;
        cfg->redis_port = (int)v;
    }
    if (slash && slash[1]) {
        if (parse_digits(slash + 1, 0, 1000000, &v) < 0) return -1;
        cfg->redis_db = (int)v;
    }
    return 0;
}

int config_listen_is_loopback(const struct gw_config *cfg) {
    const char *h = cfg->listen_host;
    return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 || strcmp(h, "localhost") == 0;
}

int config_parse_epoch(const char *s, int64_t *out) {
    long long v;
    if (parse_digits(s, 0, 4102444800LL, &v) == 0) {
        *out = v;
        return 0;
    }
    /* Exactly YYYY-MM-DDTHH:MM:SSZ, and a real moment: timegm normalises
     * 02-30 to 03-01, so the fields must survive the round trip. */
    struct tm tm = {0}, back;
    int n = 0;
    if (strlen(s) != 20 ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n != 20)
        return -1;
    struct tm want = tm;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t < 0 || !gmtime_r(&t, &back) || back.tm_year + 1900 != want.tm_year ||
        back.tm_mon + 1 != want.tm_mon || back.tm_mday != want.tm_mday ||
        back.tm_hour != want.tm_hour || back.tm_min != want.tm_min || back.tm_sec != want.tm_sec)
        return -1;
    *out = (int64_t)t;
    return 0;
}

/* Long options without a letter go by numbers past any char. */
enum {
    OPT_SHUTDOWN_DELAY = 256,
    OPT_REDIS_TLS_CA,
    OPT_REDIS_TLS_CERT,
    OPT_REDIS_TLS_KEY,
    OPT_REDIS_TLS_SERVER_NAME,
    OPT_REDIS_TLS_INSECURE,
    OPT_SENTINEL_MASTER_TLS,
};

/* The access options (#19) go by digits: '1' --auth-file, '2' --tls-cert,
 * '3' --tls-key, '4' --tls-client-ca, '5' --max-connections-per-ip,
 * '6' --cors-origin, '7' --header-timeout-ms, '8' --body-timeout-ms. */
static const char *access_option_name(int opt) {
    switch (opt) {
    case OPT_REDIS_TLS_CA: return "redis TLS CA";
    case OPT_REDIS_TLS_CERT: return "redis TLS certificate";
    case OPT_REDIS_TLS_KEY: return "redis TLS key";
    case OPT_REDIS_TLS_SERVER_NAME: return "redis TLS server name";
    case OPT_REDIS_TLS_INSECURE: return "redis TLS insecure (1)";
    case OPT_SENTINEL_MASTER_TLS: return "sentinel master TLS (0 or 1)";
    case '1': return "auth file";
    case '2': return "TLS certificate";
    case '3': return "TLS key";
    case '4': return "TLS client CA";
    case '5': return "max connections per ip (0-1000000)";
    case '6': return "cors origin (http[s]://host[:port], at most 16)";
    case '7': return "header timeout (100-600000 ms)";
    case '8': return "body timeout (100-600000 ms)";
    }
    return NULL;
}

/* Appends each comma-separated origin of list to the allowed ones. */
static int add_cors_origins(struct gw_config *cfg, const char *list) {
    char buf[ORIGIN_MAX * (ORIGIN_MAX_LEN + 1)];
    if (strlen(list) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        tok += strspn(tok, " ");
        tok[strcspn(tok, " ")] = '\0';
        if (cfg->ncors_origins == ORIGIN_MAX || origin_parse(tok) < 0) return -1;
        strcpy(cfg->cors_origins[cfg->ncors_origins++], tok);
    }
    return 0;
}

static int copy_path(char *dst, size_t cap, const char *val) {
    if (!*val || strlen(val) >= cap) return -1;
    strcpy(dst, val);
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    long long v;
    if (parse_digits(s, lo, hi, &v) < 0) return -1;
    *out = (int)v;
    return 0;
}

/* val for an error message: a Redis URL (or a list of them) with each
 * URL's user and password shown as "***", so a typo in a URL never puts
 * its password in a log. */
static const char *redacted(const char *val, char *buf, size_t cap) {
    size_t n = 0;
    for (const char *p = val; *p && n + 4 < cap;) {
        const char *end = p + strcspn(p, ",");
        const char *at = NULL;
        for (const char *q = p; q < end; q++)
            if (*q == '@') at = q;
        const char *scheme = strstr(p, "://");
        if (at && scheme && scheme < at) {
            size_t k = (size_t)(scheme + 3 - p);
            if (n + k + 3 >= cap) break;
            memcpy(buf + n, p, k);
            memcpy(buf + n + k, "***", 3);
            n += k + 3;
            p = at;
        }
        while (p < end && n + 1 < cap) buf[n++] = *p++;
        if (*p == ',' && n + 1 < cap) buf[n++] = *p++;
    }
    buf[n] = '\0';
    return buf;
}

/* One setting, applied from the environment first and then from a flag:
 * the same parser serves both so they can never disagree. */
static int apply(struct gw_config *cfg, int opt, const char *val, char *err, size_t errlen) {
    int ok = 0;
    switch (opt) {
    case 'l': ok = config_parse_listen(cfg, val); break;
    case 'r': ok = add_nodes(cfg, val); break;
    case 'Q': ok = parse_int(val, 1, GW_MAX_NODES, &cfg->quorum); break;
    case 'p':
        /* Every key is <prefix><kind>:{<name>}...: a brace in the prefix
         * would become (or break) the hash tag, moving keys and channels out
         * of the name's slot in Redis Cluster; refused in every mode, so a
         * prefix never stops working when the deployment moves to Cluster. */
        if (strlen(val) > GW_PREFIX_MAX || strpbrk(val, "{}"))
            ok = -1;
        else
            strcpy(cfg->key_prefix, val);
        break;
    case 't': ok = parse_int(val, 1, 64, &cfg->threads); break;
    case 'T': ok = parse_int(val, 10, 600000, &cfg->redis_timeout_ms); break;
    case 'm': ok = parse_int(val, 16, 1000000, &cfg->max_connections); break;
    case 'C': ok = parse_int(val, 3, 1024, &cfg->connection_memory_kib); break;
    case 'e': ok = config_parse_epoch(val, &cfg->id_epoch); break;
    case 'N': ok = parse_int(val, IDTABLE_MIN, IDTABLE_MAX, &cfg->id_namespaces); break;
    case 'j': ok = parse_int(val, 1, 3600, &cfg->id_jump_s); break;
    case 'L': ok = (cfg->log_level = log_parse_level(val)) < 0 ? -1 : 0; break;
    case 'O': ok = (cfg->log_format = log_parse_format(val)) < 0 ? -1 : 0; break;
    case 's': ok = add_sentinels(cfg, val); break;
    case 'K': ok = add_cluster_seeds(cfg, val); break;
    case 'M':
        if (!*val || strlen(val) >= sizeof cfg->sentinel_master)
            ok = -1;
        else
            strcpy(cfg->sentinel_master, val);
        break;
    case 'A': ok = parse_int(val, 0, 16, &cfg->min_replicas_ack); break;
    case 'W': ok = parse_int(val, 10, 60000, &cfg->replica_ack_timeout_ms); break;
    case 'G': ok = parse_int(val, 300, 300000, &cfg->liveness_ttl_ms); break;
    case 'H': ok = parse_int(val, 10, 300000, &cfg->stream_heartbeat_ms); break;
    case 'U': ok = parse_int(val, 100, 600000, &cfg->stream_user_timeout_ms); break;
    case '1': ok = copy_path(cfg->auth_file, sizeof cfg->auth_file, val); break;
    case '2': ok = copy_path(cfg->tls_cert, sizeof cfg->tls_cert, val); break;
    case '3': ok = copy_path(cfg->tls_key, sizeof cfg->tls_key, val); break;
    case '4': ok = copy_path(cfg->tls_client_ca, sizeof cfg->tls_client_ca, val); break;
    case '5': ok = parse_int(val, 0, 1000000, &cfg->max_connections_per_ip); break;
    case 'F': ok = copy_path(cfg->redis_password_file, sizeof cfg->redis_password_file, val); break;
    case 'E': ok = parse_int(val, 0, 1, &cfg->accept_eviction_risk); break;
    case 'X': {
        int ms = 0;
        ok = parse_int(val, 1000, 86400000, &ms);
        if (ok == 0) cfg->max_lease_ms = ms;
        break;
    }
    case '6': ok = add_cors_origins(cfg, val); break;
    case '7': ok = parse_int(val, 100, 600000, &cfg->header_timeout_ms); break;
    case '8': ok = parse_int(val, 100, 600000, &cfg->body_timeout_ms); break;
    case OPT_REDIS_TLS_CA: ok = copy_path(cfg->redis_tls_ca, sizeof cfg->redis_tls_ca, val); break;
    case OPT_REDIS_TLS_CERT:
        ok = copy_path(cfg->redis_tls_cert, sizeof cfg->redis_tls_cert, val);
        break;
    case OPT_REDIS_TLS_KEY:
        ok = copy_path(cfg->redis_tls_key, sizeof cfg->redis_tls_key, val);
        break;
    case OPT_REDIS_TLS_SERVER_NAME:
        ok = copy_path(cfg->redis_tls_server_name, sizeof cfg->redis_tls_server_name, val);
        break;
    case OPT_REDIS_TLS_INSECURE: ok = parse_int(val, 1, 1, &cfg->redis_tls_insecure); break;
    case OPT_SENTINEL_MASTER_TLS: ok = parse_int(val, 0, 1, &cfg->sentinel_master_tls); break;
    case OPT_SHUTDOWN_DELAY: ok = parse_int(val, 0, 60000, &cfg->shutdown_delay_ms); break;
    }
    char shown[512];
    if (ok < 0 && access_option_name(opt))
        snprintf(err, errlen, "bad value for %s: '%s'", access_option_name(opt), val);
    else if (ok < 0)
        snprintf(err, errlen, "bad value for %s: '%s'",
                 opt == 'l'   ? "listen address"
                 : opt == 'r' ? "Redis URL (at most 9)"
                 : opt == 'p' ? "key prefix (at most 64 bytes, no '{' or '}')"
                 : opt == 't' ? "workers (1-64)"
                 : opt == 'T' ? "redis timeout (10-600000 ms)"
                 : opt == 'm' ? "max connections (16-1000000)"
                 : opt == 'C' ? "connection memory (4-1024 KiB)"
                 : opt == 'e' ? "id epoch"
                 : opt == 'N' ? "id namespaces (16-4194304)"
                 : opt == 'j' ? "id jump (1-3600 s)"
                 : opt == 's' ? "sentinel (HOST:PORT or redis[s]://HOST:PORT, at most 8)"
                 : opt == 'K' ? "redis cluster seed (HOST:PORT or redis://..., at most 16)"
                 : opt == 'Q' ? "quorum"
                 : opt == 'M' ? "sentinel master name"
                 : opt == 'A' ? "min replicas ack (0-16)"
                 : opt == 'W' ? "replica ack timeout (10-60000 ms)"
                 : opt == 'G' ? "liveness ttl (300-300000 ms)"
                 : opt == 'H' ? "stream heartbeat (10-300000 ms)"
                 : opt == 'U' ? "stream user timeout (100-600000 ms)"
                 : opt == 'F' ? "redis password file"
                 : opt == 'O' ? "log format (text or json)"
                 : opt == 'E' ? "accept eviction risk (0 or 1)"
                 : opt == 'X' ? "max lease (1000-86400000 ms)"
                 : opt == OPT_SHUTDOWN_DELAY ? "shutdown delay (0-60000 ms)"
                                             : "log level",
                 opt == 'r' || opt == 'K' ? redacted(val, shown, sizeof shown) : val);
    return ok;
}

int config_load(struct gw_config *cfg, int argc, char **argv, char *err, size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->listen_host, "127.0.0.1");
    cfg->listen_port = 8080;
    strcpy(cfg->redis_host, "127.0.0.1");
    cfg->redis_port = 6379;
    strcpy(cfg->key_prefix, "lockgate:");
    cfg->log_level = LOG_INFO;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    cfg->redis_timeout_ms = 2000;
    cfg->max_connections = 20000;
    cfg->connection_memory_kib = 4;
    cfg->id_epoch = DEFAULT_EPOCH;
    cfg->id_namespaces = IDTABLE_DEFAULT_MAX;
    cfg->id_jump_s = 10;
    strcpy(cfg->sentinel_master, "mymaster");
    cfg->replica_ack_timeout_ms = 500;
    cfg->liveness_ttl_ms = 2000;
    cfg->stream_heartbeat_ms = 15000;
    cfg->stream_user_timeout_ms = 20000;
    cfg->max_lease_ms = 86400000;
    cfg->header_timeout_ms = 10000;
    cfg->body_timeout_ms = 10000;
    cfg->sentinel_master_tls = -1;
    cfg->shutdown_delay_ms = 5000;

    static const struct {
        int opt;
        const char *env;
    } envs[] = {
        {'l',                       "LOCKGATE_LISTEN"                },
        {'r',                       "LOCKGATE_REDIS"                 },
        {'p',                       "LOCKGATE_KEY_PREFIX"            },
        {'t',                       "LOCKGATE_THREADS"               },
        {'t',                       "LOCKGATE_WORKERS"               },
        {'T',                       "LOCKGATE_REDIS_TIMEOUT_MS"      },
        {'m',                       "LOCKGATE_MAX_CONNECTIONS"       },
        {'e',                       "LOCKGATE_ID_EPOCH"              },
        {'L',                       "LOCKGATE_LOG_LEVEL"             },
        {'s',                       "LOCKGATE_SENTINELS"             },
        {'M',                       "LOCKGATE_SENTINEL_MASTER"       },
        {'A',                       "LOCKGATE_MIN_REPLICAS_ACK"      },
        {'W',                       "LOCKGATE_REPLICA_ACK_TIMEOUT_MS"},
        {'Q',                       "LOCKGATE_QUORUM"                },
        {'C',                       "LOCKGATE_CONNECTION_MEMORY_KIB" },
        {'G',                       "LOCKGATE_LIVENESS_TTL_MS"       },
        {'H',                       "LOCKGATE_STREAM_HEARTBEAT_MS"   },
        {'U',                       "LOCKGATE_STREAM_USER_TIMEOUT_MS"},
        {'N',                       "LOCKGATE_ID_NAMESPACES"         },
        {'j',                       "LOCKGATE_ID_JUMP_S"             },
        {'K',                       "LOCKGATE_REDIS_CLUSTER"         },
        {'1',                       "LOCKGATE_AUTH_FILE"             },
        {'2',                       "LOCKGATE_TLS_CERT"              },
        {'3',                       "LOCKGATE_TLS_KEY"               },
        {'4',                       "LOCKGATE_TLS_CLIENT_CA"         },
        {'5',                       "LOCKGATE_MAX_CONNECTIONS_PER_IP"},
        {'F',                       "LOCKGATE_REDIS_PASSWORD_FILE"   },
        {'O',                       "LOCKGATE_LOG_FORMAT"            },
        {'E',                       "LOCKGATE_ACCEPT_EVICTION_RISK"  },
        {'X',                       "LOCKGATE_MAX_LEASE_MS"          },
        {'6',                       "LOCKGATE_CORS_ORIGIN"           },
        {'7',                       "LOCKGATE_HEADER_TIMEOUT_MS"     },
        {'8',                       "LOCKGATE_BODY_TIMEOUT_MS"       },
        {OPT_REDIS_TLS_CA,          "LOCKGATE_REDIS_TLS_CA"          },
        {OPT_REDIS_TLS_CERT,        "LOCKGATE_REDIS_TLS_CERT"        },
        {OPT_REDIS_TLS_KEY,         "LOCKGATE_REDIS_TLS_KEY"         },
        {OPT_REDIS_TLS_SERVER_NAME, "LOCKGATE_REDIS_TLS_SERVER_NAME" },
        {OPT_REDIS_TLS_INSECURE,    "LOCKGATE_REDIS_TLS_INSECURE"    },
        {OPT_SENTINEL_MASTER_TLS,   "LOCKGATE_SENTINEL_MASTER_TLS"   },
        {OPT_SHUTDOWN_DELAY,        "LOCKGATE_SHUTDOWN_DELAY_MS"     },
    };
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *v = getenv(envs[i].env);
        if (v && *v && apply(cfg, envs[i].opt, v, err, errlen) < 0) return -1;
    }

    static const struct option longopts[] = {
        {"listen",                 required_argument, 0, 'l'                      },
        {"redis",                  required_argument, 0, 'r'                      },
        {"key-prefix",             required_argument, 0, 'p'                      },
        {"threads",                required_argument, 0, 't'                      },
        {"workers",                required_argument, 0, 't'                      },
        {"redis-timeout-ms",       required_argument, 0, 'T'                      },
        {"max-connections",        required_argument, 0, 'm'                      },
        {"connection-memory-kib",  required_argument, 0, 'C'                      },
        {"id-epoch",               required_argument, 0, 'e'                      },
        {"id-namespaces",          required_argument, 0, 'N'                      },
        {"id-jump-s",              required_argument, 0, 'j'                      },
        {"log-level",              required_argument, 0, 'L'                      },
        {"sentinel",               required_argument, 0, 's'                      },
        {"redis-cluster",          required_argument, 0, 'K'                      },
        {"quorum",                 required_argument, 0, 'Q'                      },
        {"sentinel-master",        required_argument, 0, 'M'                      },
        {"min-replicas-ack",       required_argument, 0, 'A'                      },
        {"replica-ack-timeout-ms", required_argument, 0, 'W'                      },
        {"liveness-ttl-ms",        required_argument, 0, 'G'                      },
        {"stream-heartbeat-ms",    required_argument, 0, 'H'                      },
        {"stream-user-timeout-ms", required_argument, 0, 'U'                      },
        {"auth-file",              required_argument, 0, '1'                      },
        {"tls-cert",               required_argument, 0, '2'                      },
        {"tls-key",                required_argument, 0, '3'                      },
        {"tls-client-ca",          required_argument, 0, '4'                      },
        {"max-connections-per-ip", required_argument, 0, '5'                      },
        {"redis-password-file",    required_argument, 0, 'F'                      },
        {"log-format",             required_argument, 0, 'O'                      },
        {"accept-eviction-risk",   required_argument, 0, 'E'                      },
        {"max-lease-ms",           required_argument, 0, 'X'                      },
        {"cors-origin",            required_argument, 0, '6'                      },
        {"header-timeout-ms",      required_argument, 0, '7'                      },
        {"body-timeout-ms",        required_argument, 0, '8'                      },
        {"redis-tls-ca",           required_argument, 0, OPT_REDIS_TLS_CA         },
        {"redis-tls-cert",         required_argument, 0, OPT_REDIS_TLS_CERT       },
        {"redis-tls-key",          required_argument, 0, OPT_REDIS_TLS_KEY        },
        {"redis-tls-server-name",  required_argument, 0, OPT_REDIS_TLS_SERVER_NAME},
        {"redis-tls-insecure",     no_argument,       0, OPT_REDIS_TLS_INSECURE   },
        {"sentinel-master-tls",    required_argument, 0, OPT_SENTINEL_MASTER_TLS  },
        {"shutdown-delay-ms",      required_argument, 0, OPT_SHUTDOWN_DELAY       },
        {"help",                   no_argument,       0, 'h'                      },
        {"version",                no_argument,       0, 'V'                      },
        {0,                        0,                 0, 0                        },
    };
    optind = 1;
    opterr = 0;
    int opt, sentinel_flag_seen = 0, redis_flag_seen = 0, cluster_flag_seen = 0, cors_flag_seen = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 's' && !sentinel_flag_seen++) cfg->nsentinels = 0; /* flags win */
        if (opt == 'r' && !redis_flag_seen++) cfg->nnodes = 0;
        if (opt == 'K' && !cluster_flag_seen++) cfg->ncluster = 0;
        if (opt == '6' && !cors_flag_seen++) cfg->ncors_origins = 0;
        if (opt == 'h') {
            usage();
            return 1;
        }
        if (opt == 'V') {
            printf("lockgate 1.0.0\n");
            return 1;
        }
        if (opt == '?') {
            snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)",
                     argv[optind - 1]);
            return -1;
        }
        if (apply(cfg, opt, optarg ? optarg : "1", err, errlen) < 0) return -1;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    if (cfg->ncluster && (cfg->nnodes || cfg->nsentinels)) {
        snprintf(err, errlen,
                 "cluster mode (--redis-cluster) cannot be combined with --redis or "
                 "--sentinel (give a password in a seed: redis://[USER]:PASSWORD@host:port)");
        return -1;
    }
    if (cfg->redis_password_file[0] && cfg->redis_password[0]) {
        snprintf(err, errlen,
                 "a Redis password in the URL and --redis-password-file: give one (with a "
                 "user and the file: redis://USER:@host:port)");
        return -1;
    }
    if (!cfg->redis_password_file[0] && cfg->redis_user[0] && !cfg->redis_password[0]) {
        snprintf(err, errlen,
                 "the Redis user '%s' needs a password: redis://USER:PASSWORD@host, or "
                 "--redis-password-file",
                 cfg->redis_user);
        return -1;
    }
    if (cfg->nnodes >= 3 && cfg->min_replicas_ack) {
        /* A WAIT would have to follow every write on every master of the
         * quorum, and a quorum already survives losing a master: settled by
         * refusing rather than waiting on master 0 only, as before. */
        snprintf(err, errlen,
                 "--min-replicas-ack does not combine with quorum mode: a quorum of "
                 "masters is the acknowledgement");
        return -1;
    }
    if (cfg->nnodes == 0) { /* the default Redis */
        strcpy(cfg->nodes[0].host, cfg->redis_host);
        cfg->nodes[0].port = cfg->redis_port;
        cfg->nodes[0].tls = cfg->redis_tls;
        cfg->nnodes = 1;
    }
    if (cfg->nnodes == 2) {
        snprintf(err, errlen, "quorum mode needs at least 3 Redis masters (got 2)");
        return -1;
    }
    if (cfg->nnodes >= 3 && cfg->nsentinels) {
        snprintf(err, errlen, "quorum mode and Sentinel mode cannot be combined");
        return -1;
    }
    for (int i = 1; i < cfg->ncluster; i++)
        if (cfg->cluster[i].tls != cfg->cluster[0].tls) {
            /* The nodes the slot map names are reached like the seeds. */
            snprintf(err, errlen, "cluster seeds mix redis:// and rediss://: give one scheme");
            return -1;
        }
    if (cfg->nsentinels && cfg->sentinel_master_tls < 0) {
        /* As the sentinels (all rediss://), or as the --redis URL. */
        cfg->sentinel_master_tls = 1;
        for (int i = 0; i < cfg->nsentinels; i++)
            if (!cfg->sentinels[i].tls) cfg->sentinel_master_tls = 0;
        if (cfg->redis_tls) cfg->sentinel_master_tls = 1;
    }
    if (cfg->sentinel_master_tls < 0) cfg->sentinel_master_tls = 0;
    if (cfg->quorum == 0) cfg->quorum = cfg->nnodes / 2 + 1;
    if (cfg->quorum <= cfg->nnodes / 2 || cfg->quorum > cfg->nnodes) {
        snprintf(err, errlen, "quorum must be a majority of the %d masters (%d to %d)", cfg->nnodes,
                 cfg->nnodes / 2 + 1, cfg->nnodes);
        return -1;
    }
    return 0;
}
