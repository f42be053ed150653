/* The gateway's settings: defaults, command-line parsing, and checks that refuse values
 * that make no sense. */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most service threads (--threads). */
#define GW_THREADS_MAX 64

typedef struct gw_config {
    const char *listen;       /* address to bind */
    int port;                 /* 0: any free port (the log says which) */
    const char *port_file;    /* if set, the bound port is written there (for scripts) */
    unsigned threads;         /* service threads (gw_hub.h); default: the cores online */
    const char *data;         /* data folder: the token secret, TLS files, the RocksDB store */
    const char *store_url;    /* PostgreSQL connection URI; NULL: RocksDB in data/store */
    const char *api_key_file; /* the server API's keys, one a line (NULL: the API is off) */
    unsigned api_rate;        /* API requests a second per key (0: no limit) */
    const char *webhook_url;  /* the unread webhook's receiver (NULL: no webhook) */
    char webhook_secret[256]; /* its HMAC-SHA256 key (--webhook-secret-file) */
    size_t webhook_secret_n;
    unsigned webhook_delay_ms;   /* a message unread this long is told */
    unsigned webhook_timeout_ms; /* one POST may take this long */
    size_t webhook_queue;        /* events waiting at most (more are dropped, counted) */
    unsigned webhook_batch;      /* events in one POST at most */
    bool webhook_body;           /* events carry the message's body */
    bool insecure;               /* plain ws:// and http:// (development on loopback) */
    const char *cert;            /* TLS certificate (PEM) */
    const char *key;             /* TLS private key (PEM) */
    char secret[256];            /* HS256 token secret */
    size_t secret_n;
    bool sync;             /* fsync every group commit */
    bool open_groups;      /* join creates missing groups (--groups open) */
    bool managed_groups;   /* --groups managed: only the server API (or a token's groups
                            * claim) makes members; a client's join of any other group is
                            * `unauthorized` */
    bool demo;             /* POST /demo/login issues tokens (insecure) */
    const char *web_root;  /* static files served at / */
    size_t max_frame;      /* bytes */
    size_t max_body;       /* bytes */
    size_t queue_cap;      /* queued pushes per session before switching to notify */
    size_t queue_bytes;    /* ... or bytes of queued pushes */
    unsigned max_groups;   /* groups one user may belong to */
    unsigned slow_close_s; /* a session stuck in notify mode this long is closed */
    unsigned ack_flush_ms; /* coalesced acks are persisted this often */
    unsigned ack_every;    /* told to clients in welcome */
    unsigned ack_delay_ms; /* told to clients in welcome */
    unsigned page_default; /* enter/pull without limit */
    unsigned page_max;     /* larger limits are clamped */
    unsigned hello_timeout_s;
    unsigned error_budget;        /* bad requests tolerated in a burst before closing with 1008 */
    unsigned ping_s;              /* idle sessions are pinged after this, closed after twice it */
    unsigned inflight_max;        /* store writes in flight per session before its reads pause */
    unsigned rate_sends;          /* `send`s per second per session (0: no limit) */
    size_t rate_bytes;            /* bytes per second a session may send (0: no limit) */
    unsigned rate_conns;          /* new connections per second per source address (0: no limit) */
    unsigned rate_burst_s;        /* each rate's bucket holds this many seconds' worth */
    unsigned handshake_timeout_s; /* TLS handshake and HTTP request (or upgrade) must finish */
    size_t store_high;            /* writer queue length that pauses reading from senders */
    size_t store_overload;        /* writer queue length past which writes get `overloaded` */
    int log_level;                /* 0 error .. 3 debug */
    char node[72];                /* --node, or listen:port (the bound port, once known) */
    bool node_given;              /* --node was given */
} gw_config;

/* Fills defaults, then parses argv. Returns 0 to run, 1 when --help was printed (exit
 * 0), or -1 after printing what was wrong to stderr (exit 2). */
int gw_config_parse(gw_config *c, int argc, char **argv);

/* A node name: 1..64 of [A-Za-z0-9._:-]. */
bool gw_config_node_ok(const char *name);
/* Sets the node name: name if given, else (unless --node was given) listen:port. */
void gw_config_set_node(gw_config *c, const char *name, int port);

#endif
