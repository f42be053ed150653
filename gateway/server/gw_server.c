/*
 * The server of one service thread: the libwebsockets context on a libev loop, its
 * protocols and callbacks (each event handed to the module it is for), the one-second
 * sweep and the graceful stop, around the thread's modules (gw_modules.c, which makes
 * them without libwebsockets so that the fuzz target runs the same ones).
 */
#include "server_internal.h"

#include <errno.h>
#include <ev.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_US (1000 * LWS_US_PER_MS)
#define STOP_GRACE_MS 5000
#define TRIM_EVERY_SWEEPS 10
/* The loop's recent longest iteration is the longest of the last 10-20 s. */
#define LAG_WINDOW_SWEEPS 10

static gw_server *server_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

static gw_conns *conns_of(gw_server *srv)
{
    return srv->proc ? srv->proc->conns : NULL;
}

/* Did the peer go before the connection was taken: reset it, or closed it without a
 * byte? (A load balancer's health check, a port scan.) Such a connection is not worth
 * a warning, and libwebsockets would refuse it anyway. */
static bool gone_already(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) != 1)
        return false;
    if (p.revents & (POLLERR | POLLHUP))
        return true;
    char b;
    return (p.revents & POLLRDHUP) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void gw_server_adopt(void *ud, gw_accepted c)
{
    gw_server *srv = ud;
    if (srv->stopping || gone_already(c.fd)) {
        if (!srv->stopping)
            gw_dbg("a connection went away before it was taken (closed or reset at once)");
        close(c.fd);
        gw_conns_release(conns_of(srv), c.held);
        return;
    }
    /* As if its own listener had accepted it: TLS, then HTTP or the upgrade. Its share of
     * its address's count goes with it, released when libwebsockets frees it
     * (WSI_DESTROY, http_callback). */
    errno = 0;
    struct lws *wsi = lws_adopt_socket_vhost(srv->vhost, c.fd);
    if (!wsi) { /* it closed fd */
        int err = errno;
        gw_conns_release(conns_of(srv), c.held);
        if (err == ENOMEM)
            gw_warn("a new connection could not be taken: out of memory");
        else
            gw_dbg("a new connection could not be taken (%s): the peer went away?",
                   err ? strerror(err) : "libwebsockets refused it");
        return;
    }
    lws_set_opaque_user_data(wsi, c.held);
}

/* Connections the first thread accepted for this one (net/gw_listen.c). */
static void adopt_handed(gw_server *srv)
{
    gw_accepted cs[64];
    size_t n;
    gw_listen *l = srv->proc ? srv->proc->listener : NULL;
    while (l && (n = gw_listen_take(l, srv->m.thread, cs, 64)) > 0)
        for (size_t i = 0; i < n; i++)
            gw_server_adopt(srv, cs[i]);
}

/* The store's completions, in commit order; then the other threads' and nodes' changes
 * (pushes among them: in mid order, groups/gw_deliver.c); then writers paused for the
 * store's queue may go. */
static void drain(gw_server *srv)
{
    gw_modules *m = &srv->m;
    adopt_handed(srv);
    gw_bridge_drain(m->bridge);
    gw_feed_drain(m->feed, gw_cluster_apply, m->cluster);
    gw_sessions_store_calm(m->sessions);
    gw_stats_serve(srv); /* another thread may want the figures */
    gw_http_wake(srv);   /* ... and this one's /stats may have them now */
}

/* ---- shutdown ----------------------------------------------------------------------- */

/* Every service thread's context, for the signal handler to wake them all. */
static volatile sig_atomic_t signals_seen;
static struct lws_context *volatile signal_ctx[GW_THREADS_MAX];

static void cancel_all(void)
{
    for (unsigned i = 0; i < GW_THREADS_MAX; i++)
        if (signal_ctx[i])
            lws_cancel_service(signal_ctx[i]);
}

void gw_server_stop_all(void)
{
    signals_seen = 1;
    cancel_all();
}

static void on_signal(int sig)
{
    (void)sig;
    if (++signals_seen > 1)
        _exit(130); /* a second signal: stop at once */
    cancel_all();
}

/*
 * A graceful stop: refuse new requests but keep reading (acks already on their way are
 * still taken), let every request in flight complete and every queued reply (`sent`
 * above all) go out, persist the acks, and only then close the sessions with 1001.
 * Bounded by STOP_GRACE_MS.
 */
static void begin_stop(gw_server *srv)
{
    gw_modules *m = &srv->m;
    if (srv->stopping)
        return;
    srv->stopping = true;
    srv->stop_deadline_ms = gw_mono_ms() + STOP_GRACE_MS;
    if (m->thread == 0 && srv->proc) /* no new connection: they go elsewhere at once */
        gw_listen_close(srv->proc->listener);
    gw_app_stop(m->app);
    gw_acks_stop(gw_groups_acks(m->groups));
    gw_info("shutting down: %u sessions, %u store requests in flight",
            gw_sessions_count(m->sessions), gw_bridge_inflight(m->bridge));
    gw_acks_flush(gw_groups_acks(m->groups));
}

static void check_stop(gw_server *srv)
{
    gw_modules *m = &srv->m;
    gw_acks *acks = gw_groups_acks(m->groups);
    if (signals_seen && !srv->stopping)
        begin_stop(srv);
    if (!srv->stopping)
        return;
    uint64_t now = gw_mono_ms();
    unsigned inflight = gw_bridge_inflight(m->bridge);
    if (!srv->closing_all && ((inflight == 0 && !gw_sessions_writing(m->sessions)) ||
                              now + STOP_GRACE_MS / 2 > srv->stop_deadline_ms)) {
        srv->closing_all = true;
        gw_acks_flush(acks);
        gw_sessions_close_all(m->sessions, LWS_CLOSE_STATUS_GOINGAWAY, "server shutting down");
    }
    /* Acks taken while the sessions were closing get their own flush. */
    if (srv->closing_all && gw_acks_waiting(acks) && inflight == 0)
        gw_acks_flush(acks);
    if (srv->closing_all && gw_sessions_count(m->sessions) == 0 &&
        gw_bridge_inflight(m->bridge) == 0 && !gw_acks_waiting(acks))
        srv->finished = true;
    if (now > srv->stop_deadline_ms) {
        gw_warn("shutdown: grace period over with %u sessions and %u store requests left",
                gw_sessions_count(m->sessions), gw_bridge_inflight(m->bridge));
        srv->finished = true;
    }
}

/* ---- timers ------------------------------------------------------------------------- */

/*
 * Every TRIM_EVERY_SWEEPS seconds: the pages of freed heap go back to the kernel. A burst
 * of TLS handshakes leaves their freed buffers behind the sessions' live state, about
 * 1.1 KiB of RSS per idle wss session at 5,000; glibc does not return pages below the
 * top of a heap by itself. Costs 0.2-1 ms at 5,000 sessions (docs/BENCHMARKS.md, W4).
 */
static void trim_heap(gw_server *srv)
{
#ifdef __GLIBC__
    /* One thread trims every thread's heap (malloc_trim walks all of glibc's arenas). */
    if (srv->m.thread == 0 && srv->sweeps % TRIM_EVERY_SWEEPS == 0)
        malloc_trim(0);
#else
    (void)srv;
#endif
}

static void on_sweep_timer(lws_sorted_usec_list_t *sul)
{
    gw_server *srv = lws_container_of(sul, gw_server, sul_sweep);
    srv->sweeps++;
    gw_sessions_sweep(srv->m.sessions, gw_mono_ms());
    trim_heap(srv);
    gw_groups_sweep(srv->m.groups);
    gw_stats_tick(srv);
    if (srv->sweeps % LAG_WINDOW_SWEEPS == 0)
        gw_looplag_tick(srv->lag);
    check_stop(srv);
    lws_sul_schedule(srv->ctx, 0, &srv->sul_sweep, on_sweep_timer, SWEEP_US);
}

/* ---- callbacks ---------------------------------------------------------------------- */

typedef struct pss {
    gw_sess *sess;
} pss;

static int uri_is(struct lws *wsi, const char *want)
{
    char uri[64];
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    return n > 0 && strcmp(uri, want) == 0;
}

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                       size_t len)
{
    gw_server *srv = server_of(wsi);
    pss *ps = user;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* The protocol lives at /ws only. */
        return uri_is(wsi, "/ws") ? 0 : 1;
    case LWS_CALLBACK_ESTABLISHED:
        if (srv->stopping)
            return -1;
        ps->sess = gw_sess_new(srv->m.sessions, wsi,
                               strcmp(lws_get_protocol(wsi)->name, GW_PROTO_JSON) == 0);
        return ps->sess ? 0 : -1; /* the hello deadline and pings: the sweep */
    case LWS_CALLBACK_RECEIVE:
        if (!ps->sess)
            return -1;
        /* What another thread committed before this frame was sent is applied first: a
         * client that saw its join confirmed there may send here at once (cluster/). This
         * thread's own completions go before it, as in drain(): a read of a user's groups
         * taken before the change must not be applied after it. */
        if (gw_feed_pending(srv->m.feed)) {
            gw_bridge_drain(srv->m.bridge);
            gw_feed_drain(srv->m.feed, gw_cluster_apply, srv->m.cluster);
        }
        return gw_sess_rx(ps->sess, in, len, lws_is_first_fragment(wsi), lws_is_final_fragment(wsi),
                          lws_frame_is_binary(wsi));
    case LWS_CALLBACK_SERVER_WRITEABLE: return ps->sess ? gw_out_writeable(ps->sess) : -1;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (ps->sess)
            gw_sess_alive(ps->sess);
        return 0;
    case LWS_CALLBACK_CLOSED:
        if (ps->sess) {
            gw_sess_free(ps->sess);
            ps->sess = NULL;
        }
        return 0;
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        drain(srv);
        check_stop(srv);
        return 0;
    default: return 0;
    }
}

/* Protocol 0: plain HTTP (gw_http.c). New connections are looked at before that, when
 * they are accepted (net/gw_listen.c). */
static int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                         size_t len)
{
    /* Every connection ends here, HTTP or WebSocket: its address holds one fewer. */
    if (reason == LWS_CALLBACK_WSI_DESTROY) {
        gw_conns_release(conns_of(server_of(wsi)), lws_get_opaque_user_data(wsi));
        lws_set_opaque_user_data(wsi, NULL);
    }
    return gw_http_callback(wsi, reason, user, in, len);
}

/* Copied into each server (the HTTP entry's state size, known to gw_http.c only, is set
 * in the copy): every context has its own, as libwebsockets keeps pointers into it. */
static const struct lws_protocols protocols[GW_PROTOCOLS] = {
    {"http", http_callback, 0, 0, 0, NULL, 0},
    /* rx_buffer_size: libwebsockets keeps a buffer this big per session for the whole
     * session, and hands a larger message over in pieces of it (gw_sess_rx joins them).
     * 512 bytes holds a typical request whole (a send of a 200-byte body is about 260)
     * and keeps an idle session's memory small: 1 KiB cost 500 bytes more RSS per idle
     * session, 64 KiB 6 KiB. It used to bound each send() too, which made 512 cost CPU
     * per delivery; tx_packet_size (gw_server_new) now sets that apart. */
    {"gw.v1", ws_callback, sizeof(pss), 512, 0, NULL, 0},
    /* The same messages as JSON text, for any WebSocket tool (docs/PROTOCOL.md). */
    {GW_PROTO_JSON, ws_callback, sizeof(pss), 512, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- life cycle --------------------------------------------------------------------- */

void gw_server_wake(void *ud)
{
    gw_server *srv = ud;
    /* From the store thread or another service thread: lws_cancel_service is safe. */
    if (srv->ctx)
        lws_cancel_service(srv->ctx);
}

int gw_server_new(const gw_config *cfg, st_store *store, gw_process *proc, unsigned thread,
                  gw_server **out)
{
    *out = NULL;
    struct ev_loop *loop = NULL;
    gw_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -1;
    srv->proc = proc;
    memcpy(srv->protocols, protocols, sizeof(protocols));
    srv->protocols[0].per_session_data_size = gw_http_pss_size();
    /* tx_packet_size: without it libwebsockets sends at most rx_buffer_size (512 bytes) per
     * send() and keeps the rest of a frame for the next writeable, so a batch frame of three
     * 200-byte messages took two sends and a poll round trip between them. A whole frame
     * per send() (the kernel takes what fits; libwebsockets keeps only the remainder). */
    for (size_t i = 1; srv->protocols[i].name; i++)
        srv->protocols[i].tx_packet_size = cfg->max_frame + 16; /* + the frame's header */

    /* No libwebsockets validity timers (a hang-up time of 0 turns them off): the sweep
     * pings and hangs up instead, see session/gw_sess.c. */
    static const lws_retry_bo_t retry = {.secs_since_valid_ping = 0, .secs_since_valid_hangup = 0};

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    /* The context does not listen: it adopts what the process's listener accepted for its
     * thread (net/gw_net.h). */
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.protocols = srv->protocols;
    info.user = srv;
    info.retry_and_idle_policy = &retry;
    /* HTTP/1.1 only: a browser that loaded the page over HTTP/2 would otherwise open the
     * WebSocket on that connection (RFC 8441), which this libwebsockets serves poorly. */
    info.alpn = "http/1.1";
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    /* A TLS handshake, and then the HTTP request or WebSocket upgrade (however slowly its
     * bytes come: the clock starts when the connection is accepted), must finish in
     * time; a connection that sends nothing at all is closed after the same time. */
    info.timeout_secs = cfg->handshake_timeout_s;
    info.timeout_secs_ah_idle = cfg->handshake_timeout_s;
    /* The header buffer stays libwebsockets' 4 KiB: a long URL is cut to fit instead. */
    info.token_limits = gw_http_token_limits();
    if (!cfg->insecure) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = cfg->cert;
        info.ssl_private_key_filepath = cfg->key;
        /* TLS 1.2 and 1.3 only, forward-secret AEAD suites only. */
        info.ssl_options_set = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 |
                               SSL_OP_NO_TLSv1_1 | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE;
        /* A client context of our own, empty: the gateway makes no TLS connections, and
         * libwebsockets' own loads the system's CA certificates into every context (about
         * 360 KB each) and, with several contexts, 4.1 does not free all of them. */
        if (!(srv->client_ssl_ctx = SSL_CTX_new(TLS_client_method())))
            goto fail;
        info.provided_client_ssl_ctx = srv->client_ssl_ctx;
        info.ssl_cipher_list = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                               "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                               "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
    }
    /* libwebsockets on a libev loop of ours: libev waits with epoll, whose cost follows the
     * sockets that are ready. libwebsockets' own loop polls every socket on every wake-up,
     * which with 10,000 sessions cost about 1 ms a wake-up, several times per message. */
    loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (!loop) {
        gw_err("cannot make the event loop (libev)");
        goto fail;
    }
    gw_modules_deps md = {.cfg = cfg,
                          .store = store,
                          .thread = thread,
                          .loop = loop,
                          .hub = proc->hub,
                          .keys = proc->keys,
                          .wake = gw_server_wake,
                          .wake_ud = srv};
    if (gw_modules_init(&srv->m, &md) != 0 || !(srv->lag = gw_looplag_new(loop)))
        goto fail;
    gw_http_start(srv);
    void *loops[1] = {loop};
    info.foreign_loops = loops;
    info.options |= LWS_SERVER_OPTION_LIBEV;
    srv->ctx = lws_create_context(&info);
    srv->vhost = srv->ctx ? lws_get_vhost_by_name(srv->ctx, "default") : NULL;
    if (!srv->vhost) {
        gw_err("cannot start service thread %u (a bad certificate or key?)", thread + 1);
        goto fail;
    }
    signal_ctx[thread] = srv->ctx;
    lws_sul_schedule(srv->ctx, 0, &srv->sul_sweep, on_sweep_timer, SWEEP_US);
    /* What the feed holds already is drained at the first wake-up. */
    gw_feed_attach(srv->m.feed, gw_server_wake, srv);
    gw_server_wake(srv);
    *out = srv; /* the ack flush timer is armed by the first ack (groups/gw_acks.c) */
    return 0;
fail:
    if (!srv->m.loop && loop)
        ev_loop_destroy(loop);
    gw_server_free(srv);
    return -1;
}

void gw_server_name(gw_server *srv, int port)
{
    srv->port = port;
    gw_config_set_node(&srv->m.cfg, NULL, port);
    gw_log_set_node(srv->m.cfg.node);
}

void gw_server_run(gw_server *srv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!srv->finished) {
        ev_run(srv->m.loop, EVRUN_ONCE);
        check_stop(srv);
    }
    /* Whatever acks are still here go to the store now; st_close commits them. */
    gw_acks_flush(gw_groups_acks(srv->m.groups));
    gw_sessions_thread_end();
}

void gw_server_drain(gw_server *srv)
{
    /* After st_close every store request has completed: run what was posted since. The
     * store is gone: a completion that wants to read on is refused (ST_ECLOSED). */
    gw_bridge_close(srv->m.bridge);
    gw_bridge_drain(srv->m.bridge);
}

void gw_server_free(gw_server *srv)
{
    if (!srv)
        return;
    if (srv->m.feed) /* the feed outlives the server until st_close */
        gw_feed_attach(srv->m.feed, NULL, NULL);
    if (srv->ctx) {
        lws_sul_schedule(srv->ctx, 0, &srv->sul_sweep, NULL, LWS_SET_TIMER_USEC_CANCEL);
        signal_ctx[srv->m.thread] = NULL;
        lws_context_destroy(srv->ctx); /* its CLOSED callbacks free the sessions */
    }
    struct ev_loop *loop = srv->m.loop;
    /* The modules' timers stop while the loop is there. */
    gw_http_stop(srv);
    gw_looplag_free(srv->lag);
    gw_modules_release(&srv->m);
    if (loop) {
        ev_run(loop, EVRUN_NOWAIT); /* what the context's teardown left to the loop */
        ev_loop_destroy(loop);
    }
    SSL_CTX_free(srv->client_ssl_ctx); /* after the context that used it */
    free(srv);
}
