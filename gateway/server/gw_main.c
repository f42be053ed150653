/* gw: the gateway's entry point. See --help and docs/ARCHITECTURE.md. */
#include "gw_server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Without a secret given, one is kept in the data folder (created with random bytes on
 * first start) so that tokens survive restarts. */
static int default_secret(gw_config *cfg)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/token-secret", cfg->data);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(cfg->secret, 1, sizeof(cfg->secret), f);
        fclose(f);
        while (n && (cfg->secret[n - 1] == '\n' || cfg->secret[n - 1] == '\r'))
            n--;
        if (n < 16) {
            gw_err("%s holds fewer than 16 bytes: remove it to make a new one", path);
            return -1;
        }
        cfg->secret_n = n;
        gw_info("token secret: %s", path);
        return 0;
    }
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -1;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(cfg->secret + 2 * i, 3, "%02x", raw[i]);
    cfg->secret_n = 2 * sizeof(raw);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, cfg->secret, cfg->secret_n) != (ssize_t)cfg->secret_n) {
        gw_err("cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    gw_info("token secret: generated %s (keep it private; tools/gw_token reads it)", path);
    return 0;
}

/* Store trouble, told by the store thread (gw_log is safe from any thread). */
static void on_store_event(void *ud, const st_event *ev)
{
    (void)ud;
    switch (ev->kind) {
    case ST_EV_WRITE_FAILED:
        gw_err("store: write failed: %s; refusing writes (`unavailable`) until it recovers",
               ev->reason);
        break;
    case ST_EV_STILL_FAILING:
        /* Attempts come every few seconds: say so at the 1st, 2nd, 4th, 8th... only. */
        if ((ev->attempts & (ev->attempts - 1)) == 0)
            gw_warn("store: still not writable after %.1f s (attempt %" PRIu64 ", %" PRIu64
                    " writes refused): %s",
                    (double)ev->down_ms / 1000.0, ev->attempts, ev->refused, ev->reason);
        break;
    case ST_EV_RECOVERED:
        gw_info("store: recovered after %.1f s (attempt %" PRIu64 ", %" PRIu64
                " writes refused; the failure was: %s)",
                (double)ev->down_ms / 1000.0, ev->attempts, ev->refused, ev->reason);
        break;
    }
}

int main(int argc, char **argv)
{
    gw_config cfg;
    int prc = gw_config_parse(&cfg, argc, argv);
    if (prc)
        return prc > 0 ? 0 : 2;
    gw_log_set_level((enum gw_log_level)cfg.log_level);
    gw_log_set_node(cfg.node); /* with --port 0, named again once the port is bound */
    gw_log_capture_lws();
    /* A write past the file size limit (RLIMIT_FSIZE) raises SIGXFSZ, which by default
     * kills the process. Ignored, the write fails with EFBIG like any other full disk:
     * the store refuses writes and recovers once the limit is lifted. */
    signal(SIGXFSZ, SIG_IGN);
    gw_info("gw starting: data %s, store %s, %s", cfg.data,
            cfg.store_url ? "PostgreSQL" : "RocksDB", cfg.insecure ? "no TLS (--insecure)" : "TLS");

    if (mkdir(cfg.data, 0700) != 0 && errno != EEXIST) {
        gw_err("cannot create data folder %s: %s", cfg.data, strerror(errno));
        return 1;
    }
    if (cfg.secret_n == 0 && default_secret(&cfg) != 0)
        return 1;
    static char cert[4200], key[4200];
    if (!cfg.insecure && !cfg.cert) {
        if (gw_tls_self_signed(cfg.data, cert, sizeof(cert), key, sizeof(key)) != 0)
            return 1;
        cfg.cert = cert;
        cfg.key = key;
    }

    char store_path[4096];
    snprintf(store_path, sizeof(store_path), "%s/store", cfg.data);
    st_options so;
    st_options_init(&so);
    so.path = store_path;
    so.url = cfg.store_url;
    so.sync = cfg.sync;
    so.open_groups = cfg.open_groups;
    so.on_event = on_store_event;
    so.node = cfg.node;
    so.test_drop_announcements = cfg.test_drop_announcements;
    /* The unread webhook finds what no node told in the store's log of batches. */
    so.unread_log = cfg.webhook_url != NULL;
    so.changes_keep = cfg.retain_changes;
    so.changes_keep_ms = cfg.retain_changes_ms;
    /* The service threads; other gateways' changes (PostgreSQL: the change feed) go to
     * each of them. RocksDB has no other gateways. */
    gw_process *proc = gw_process_new(&cfg);
    if (!proc)
        return 1;
    so.on_change = cfg.store_url ? gw_feeds_post : NULL;
    so.change_ud = gw_process_feeds(proc);
    st_store *store = NULL;
    char err[1024];
    int rc = st_open(&so, &store, err, sizeof(err));
    if (rc != 0) {
        /* A URL may hold a password: the store's message says where without it. */
        if (rc == ST_EBUSY)
            /* RocksDB's folder is one process's: what to do is the gateway's to say. */
            gw_err("the data folder %s is in use by another gateway (%s): stop that gateway "
                   "first, or start this one with another --data folder",
                   cfg.data, err);
        else if (cfg.store_url)
            gw_err("%s", err);
        else
            gw_err("%s (%s)", err, store_path);
        gw_process_free(proc);
        return 1;
    }
    gw_info("store opened: %s %s (sync %s, groups %s)%s", st_backend_name(store), st_where(store),
            cfg.sync ? "on" : "off",
            cfg.managed_groups ? "managed"
            : cfg.open_groups  ? "open"
                               : "existing",
            st_writable(store) ? "" : "; not reachable yet: retrying");

    int port = gw_process_start(proc, &cfg, store);
    if (port < 0) {
        gw_process_store_closing(proc);
        st_close(store);
        gw_process_finish(proc);
        gw_process_free(proc);
        return 1;
    }
    gw_info("listening on %s://%s:%d/ws (%s; %u service thread%s)", cfg.insecure ? "ws" : "wss",
            cfg.listen, port,
            cfg.insecure ? "plain, no TLS: development only" : "TLS 1.2 and 1.3 only", cfg.threads,
            cfg.threads == 1 ? "" : "s");
    if (!cfg.insecure)
        gw_info("TLS certificate %s, key %s", cfg.cert, cfg.key);
    if (cfg.port_file) {
        FILE *f = fopen(cfg.port_file, "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0)
            gw_warn("cannot write port file %s", cfg.port_file);
    }

    if (cfg.demo)
        gw_warn("DEMO MODE: POST /demo/login gives a token for any user name, no password. "
                "For trying the product only; never expose it.");
    if (cfg.web_root)
        gw_info("serving the demo page from %s at %s://%s:%d/", cfg.web_root,
                cfg.insecure ? "http" : "https", cfg.listen, port);
    gw_process_run(proc);
    gw_process_store_closing(proc);
    st_close(store); /* every write in flight completes first */
    gw_process_finish(proc);
    gw_process_free(proc);
    gw_info("stopped");
    return 0;
}
