#include "gwfx.h"
#include "pgfx.h"
#include "rawws.h"
#include "store.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <jwt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

void gwfx_file_tail(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *l = fopen(path, "r");
    if (!l)
        return;
    fseek(l, 0, SEEK_END);
    long size = ftell(l), want = (long)n - 1;
    fseek(l, size > want ? size - want : 0, SEEK_SET);
    size_t got = fread(out, 1, n - 1, l);
    out[got] = 0;
    fclose(l);
}

static void spawn(gwfx *f)
{
    char port_file[300], log_file[300], data[300];
    snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
    snprintf(log_file, sizeof(log_file), "%s/gw.log", f->dir);
    snprintf(data, sizeof(data), "%s/data", f->dir);
    unlink(port_file);
    char cert[300], key[300];
    snprintf(cert, sizeof(cert), "%s/cert.pem", f->dir);
    snprintf(key, sizeof(key), "%s/key.pem", f->dir);
    const char *argv[40] = {GW_BINARY, "--listen", "127.0.0.1", "--port",      "0", "--port-file",
                            port_file, "--data",   data,        "--log-level", "3"};
    int n = 11;
    if (f->store_url) {
        argv[n++] = "--store";
        argv[n++] = f->store_url;
    }
    if (f->tls && !f->own_cert) {
        argv[n++] = "--cert";
        argv[n++] = cert;
        argv[n++] = "--key";
        argv[n++] = key;
    } else if (!f->tls) {
        argv[n++] = "--insecure";
    }
    for (int i = 0; i < f->n_args; i++)
        argv[n++] = f->args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("GW_SECRET", GWFX_SECRET, 1);
        execv(GW_BINARY, (char *const *)argv);
        _exit(127);
    }
    f->pid = pid;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (elapsed_ms(&t0) < 20000) {
        FILE *pf = fopen(port_file, "r");
        if (pf) {
            int port = 0;
            int got = fscanf(pf, "%d", &port);
            fclose(pf);
            if (got == 1 && port > 0) {
                f->port = port;
                snprintf(f->url, sizeof(f->url), "%s://127.0.0.1:%d/ws", f->tls ? "wss" : "ws",
                         port);
                return;
            }
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) != 0) {
            char tail[400]; /* what it said last: the reason, for whoever reads the failure */
            gwfx_file_tail(log_file, tail, sizeof(tail));
            cr_assert_fail("gateway exited at start (see %s): %s", log_file, tail);
        }
        usleep(20000);
    }
    cr_assert_fail("gateway did not start listening within 20 s (see %s)", log_file);
}

static void start(gwfx *f, const char *const *extra, bool tls, bool own_cert, gwc_ctx *share)
{
    char *url = f->store_url; /* set by the caller: NULL, or gwfx_start_on's copy */
    memset(f, 0, sizeof(*f));
    f->store_url = url;
    f->ctx = share;
    f->shared_ctx = share != NULL;
    f->tls = tls;
    f->own_cert = own_cert;
    if (pgfx_on() && !f->store_url) {
        f->store_url = pgfx_db_new();
        f->own_store = true;
    }
    const char *base = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/gw-test-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(f->dir));
    for (; extra && extra[f->n_args]; f->n_args++) {
        cr_assert_lt(f->n_args, 16);
        snprintf(f->args[f->n_args], sizeof(f->args[0]), "%s", extra[f->n_args]);
    }
    gwc_options o = {0};
    char cert[300];
    if (tls && !own_cert) {
        char cmd[1200];
        snprintf(cert, sizeof(cert), "%s/cert.pem", f->dir);
        snprintf(cmd, sizeof(cmd),
                 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                 "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 "
                 "-days 2 -keyout %s/key.pem -out %s >/dev/null 2>&1",
                 f->dir, cert);
        cr_assert_eq(system(cmd), 0, "openssl could not make a test certificate");
        o.ca_file = cert;
    }
    if (!f->ctx)
        f->ctx = gwc_ctx_new(&o);
    cr_assert_not_null(f->ctx);
    spawn(f);
}

void gwfx_start(gwfx *f, const char *const *extra)
{
    f->store_url = NULL;
    start(f, extra, false, false, NULL);
}

void gwfx_start_on(gwfx *f, const char *store_url, const char *const *extra)
{
    f->store_url = strdup(store_url);
    start(f, extra, false, false, NULL);
}

void gwfx_start_beside(gwfx *f, gwfx *other, const char *const *extra)
{
    f->store_url = other->store_url ? strdup(other->store_url) : NULL;
    start(f, extra, false, false, other->ctx);
}

gwfx *gwfx_start_nodes(gwfx *a, gwfx *b, const char *const *extra)
{
    gwfx_start(a, extra);
    if (!pgfx_on())
        return a;
    gwfx_start_beside(b, a, extra);
    return b;
}

void gwfx_start_beside_on(gwfx *f, gwfx *other, const char *store_url, const char *const *extra)
{
    f->store_url = strdup(store_url);
    start(f, extra, false, false, other->ctx);
}

void gwfx_start_with(gwfx *f, gwfx *beside, const char *const *base, const char *const *more)
{
    const char *args[32];
    int n = 0;
    for (int i = 0; base[i]; i++, n++) {
        cr_assert_lt(n, 31, "too many gateway flags");
        args[n] = base[i];
    }
    for (int i = 0; more && more[i]; i++, n++) {
        cr_assert_lt(n, 31, "too many gateway flags");
        args[n] = more[i];
    }
    args[n] = NULL;
    if (beside)
        gwfx_start_beside(f, beside, args);
    else
        gwfx_start(f, args);
}

void gwfx_start_tls(gwfx *f, const char *const *extra)
{
    f->store_url = NULL;
    start(f, extra, true, false, NULL);
}

void gwfx_start_tls_own(gwfx *f, const char *const *extra)
{
    f->store_url = NULL;
    start(f, extra, true, true, NULL);
}

bool gwfx_alive(gwfx *f)
{
    int status;
    return f->pid > 0 && waitpid(f->pid, &status, WNOHANG) == 0;
}

void gwfx_stop(gwfx *f, int sig)
{
    if (f->pid <= 0)
        return;
    kill(f->pid, sig);
    int status = 0;
    waitpid(f->pid, &status, 0);
    f->pid = 0;
    if (sig == SIGTERM) {
        /* A graceful stop exits 0; under the sanitizers a leak or error would not. */
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "gateway did not stop cleanly (status %d; see %s/gw.log)", status, f->dir);
    }
}

void gwfx_wait_exit(gwfx *f)
{
    int status = 0;
    cr_assert_eq(waitpid(f->pid, &status, 0), f->pid);
    f->pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "gateway did not stop cleanly (status %d; see %s/gw.log)", status, f->dir);
}

void gwfx_restart(gwfx *f)
{
    spawn(f);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

void gwfx_cleanup(gwfx *f)
{
    gwfx_stop(f, SIGTERM);
    if (!f->shared_ctx)
        gwc_ctx_free(f->ctx);
    f->ctx = NULL;
    if (f->dir[0])
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (f->store_url && f->own_store)
        pgfx_db_drop(f->store_url);
    free(f->store_url);
    f->store_url = NULL;
}

long gwfx_rss_kib(gwfx *f)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)f->pid);
    FILE *fp = fopen(path, "r");
    long kib = -1;
    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (fp)
        fclose(fp);
    return kib;
}

char *gwfx_token(const char *uid)
{
    char *tok = NULL;
    int rc = gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), uid, (int64_t)time(NULL) + 3600, NULL,
                            0, false, &tok);
    cr_assert_eq(rc, 0, "token: %s", gwc_strerror(rc));
    return tok;
}

char *gwfx_token_issued(const char *uid, long iat)
{
    jwt_t *jwt = NULL;
    cr_assert_eq(jwt_new(&jwt), 0);
    cr_assert_eq(jwt_add_grant(jwt, "sub", uid), 0);
    cr_assert_eq(jwt_add_grant_int(jwt, "exp", (long)time(NULL) + 3600), 0);
    if (iat != GWFX_NO_IAT)
        cr_assert_eq(jwt_add_grant_int(jwt, "iat", iat), 0);
    cr_assert_eq(jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)GWFX_SECRET,
                             (int)strlen(GWFX_SECRET)),
                 0);
    char *tok = jwt_encode_str(jwt);
    jwt_free(jwt);
    cr_assert_not_null(tok);
    return tok;
}

gwc_conn *gwfx_connect_raw(gwfx *f)
{
    gwc_conn *k = NULL;
    int rc = gwc_connect(f->ctx, f->url, GWFX_WAIT, &k);
    cr_assert_eq(rc, 0, "connect %s: %s", f->url, gwc_strerror(rc));
    return k;
}

bool gwfx_slice_is(pr_slice s, const char *str)
{
    size_t n = strlen(str);
    return s.n == n && (n == 0 || memcmp(s.p, str, n) == 0);
}

pr_slice gwfx_sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

void gwfx_send(gwc_conn *k, const msgpack_sbuffer *sb)
{
    int rc = gwc_send(k, sb->data, sb->size);
    cr_assert_eq(rc, 0, "send: %s", gwc_strerror(rc));
}

void gwfx_ack(gwc_conn *k, const char *gid, uint64_t mid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack a = {{(const uint8_t *)gid, strlen(gid)}, mid};
    pr_enc_ack(&sb, &a, 1);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

pr_event gwfx_expect_any(gwc_conn *k)
{
    pr_event ev;
    int rc = gwc_next(k, GWFX_WAIT, &ev);
    cr_assert_eq(rc, 0, "waiting for an event: %s (close code %d)", gwc_strerror(rc),
                 gwc_close_code(k));
    return ev;
}

pr_event gwfx_expect(gwc_conn *k, enum pr_ev_type t)
{
    pr_event ev;
    int rc = gwc_next(k, GWFX_WAIT, &ev);
    cr_assert_eq(rc, 0, "waiting for event %d: %s (close code %d)", t, gwc_strerror(rc),
                 gwc_close_code(k));
    if (ev.t == PR_EV_ERR && t != PR_EV_ERR)
        cr_assert_fail("expected event %d, got err %.*s: %.*s", t, (int)ev.err_name.n,
                       ev.err_name.p, (int)ev.err_msg.n, ev.err_msg.p);
    cr_assert_eq(ev.t, t, "expected event %d, got %d", t, ev.t);
    return ev;
}

pr_event gwfx_request(gwc_conn *k, const msgpack_sbuffer *sb, enum pr_ev_type t)
{
    gwfx_send(k, sb);
    return gwfx_expect(k, t);
}

gwc_conn *gwfx_login(gwfx *f, const char *uid, pr_event *welcome)
{
    gwc_conn *k = gwfx_connect_raw(f);
    char *tok = gwfx_token(uid);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    pr_event ev = gwfx_request(k, &sb, PR_EV_WELCOME);
    cr_assert(gwfx_slice_is(ev.welcome.uid, uid));
    if (welcome)
        *welcome = ev;
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    return k;
}

void gwfx_login_joined(gwfx *f, const char *gid, int n, const char *const *uids, gwc_conn **out)
{
    for (int i = 0; i < n; i++)
        out[i] = gwfx_login(f, uids[i], NULL);
    for (int i = 0; i < n; i++)
        gwfx_join(out[i], gid);
}

void gwfx_login_two(gwfx *fa, const char *ua, gwfx *fb, const char *ub, const char *gid,
                    gwc_conn **ka, gwc_conn **kb)
{
    *ka = gwfx_login(fa, ua, NULL);
    *kb = gwfx_login(fb, ub, NULL);
    gwfx_join(*ka, gid);
    gwfx_join(*kb, gid);
}

pr_group gwfx_first_group(const pr_event *welcome)
{
    pr_group g;
    cr_assert_eq(pr_event_group(welcome, 0, &g), 0, "the welcome has a first group");
    return g;
}

void gwfx_join(gwc_conn *k, const char *gid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 7, gwfx_sl(gid));
    pr_event ev = gwfx_request(k, &sb, PR_EV_JOINED);
    cr_assert(gwfx_slice_is(ev.gid, gid));
    cr_assert_eq(ev.rid, 7);
    msgpack_sbuffer_destroy(&sb);
}

uint64_t gwfx_send_msg(gwc_conn *k, const char *gid, const char *cid, const char *text)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_body body = {{(const uint8_t *)text, strlen(text)}, false};
    pr_enc_send(&sb, 9, gwfx_sl(gid), gwfx_sl(cid), body);
    pr_event ev = gwfx_request(k, &sb, PR_EV_SENT);
    cr_assert(gwfx_slice_is(ev.cid, cid));
    msgpack_sbuffer_destroy(&sb);
    return ev.mid;
}

bool gwfx_quiet(gwc_conn *k, int ms)
{
    pr_event ev;
    return gwc_next(k, ms, &ev) == GWC_ETIMEDOUT;
}

int gwfx_closed(gwc_conn *k)
{
    pr_event ev;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (elapsed_ms(&t0) < 3 * GWFX_WAIT) {
        int rc = gwc_next(k, GWFX_WAIT, &ev);
        if (rc == GWC_ECLOSED)
            return gwc_close_code(k);
        if (rc == GWC_EPROTO)
            continue;
    }
    cr_assert_fail("the server did not close the session");
    return -1;
}

char *gwfx_call(gwfx *f, const char *method, const char *path, const char *bearer, const char *body,
                int *status)
{
    char out[400], in[400], cmd[2048];
    snprintf(out, sizeof(out), "%s/http-body", f->dir);
    snprintf(in, sizeof(in), "%s/http-request", f->dir);
    int n =
        snprintf(cmd, sizeof(cmd), "curl -s -m 10 -o %s -w '%%{http_code}' -X %s ", out, method);
    if (f->tls)
        n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, "--cacert %s/cert.pem ", f->dir);
    if (bearer) /* from a file: a key never goes on a command line (ps shows it) */
        n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, "-H @%s/http-auth ", f->dir);
    if (bearer) {
        char hp[400];
        snprintf(hp, sizeof(hp), "%s/http-auth", f->dir);
        FILE *h = fopen(hp, "w");
        cr_assert_not_null(h);
        fprintf(h, "Authorization: Bearer %s\n", bearer);
        fclose(h);
    }
    if (body) {
        FILE *b = fopen(in, "wb");
        cr_assert_not_null(b);
        fwrite(body, 1, strlen(body), b);
        fclose(b);
        n += snprintf(cmd + n, sizeof(cmd) - (size_t)n,
                      "-H 'Content-Type: application/json' --data-binary @%s ", in);
    }
    snprintf(cmd + n, sizeof(cmd) - (size_t)n, "'%s://127.0.0.1:%d%s'", f->tls ? "https" : "http",
             f->port, path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    *status = 0;
    if (fscanf(p, "%d", status) != 1)
        *status = 0;
    pclose(p);
    FILE *b = fopen(out, "rb");
    if (!b)
        return strdup("");
    fseek(b, 0, SEEK_END);
    long len = ftell(b);
    fseek(b, 0, SEEK_SET);
    char *resp = malloc((size_t)len + 1);
    size_t got = fread(resp, 1, (size_t)len, b);
    resp[got] = 0;
    fclose(b);
    unlink(out);
    return resp;
}

static char api_key_path[300];

static void remove_api_key_file(void)
{
    unlink(api_key_path);
}

const char *gwfx_api_key_file(void)
{
    if (!api_key_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(api_key_path, sizeof(api_key_path), "%s/gw-api-keys-%d",
                 tmp && *tmp ? tmp : "/tmp", (int)getpid());
        FILE *k = fopen(api_key_path, "w");
        cr_assert_not_null(k);
        fprintf(k, "# the tests' key\n%s\n", GWFX_API_KEY);
        fclose(k);
        atexit(remove_api_key_file);
    }
    return api_key_path;
}

char *gwfx_api(gwfx *f, const char *method, const char *path, const char *body, int want)
{
    int status;
    char *out = gwfx_call(f, method, path, GWFX_API_KEY, body, &status);
    cr_assert_eq(status, want, "%s %s: %d, expected %d: %s", method, path, status, want, out);
    return out;
}

/* How many whole responses (headers and Content-Length bytes of body) out holds. */
static int whole_responses(const char *out, size_t n)
{
    int count = 0;
    const char *p = out, *end = out + n;
    for (;;) {
        const char *h = strstr(p, "\r\n\r\n");
        if (!h)
            return count;
        const char *cl = strstr(p, "content-length: ");
        size_t body = cl && cl < h ? strtoul(cl + 16, NULL, 10) : 0;
        if ((size_t)(end - (h + 4)) < body)
            return count;
        count++;
        p = h + 4 + body;
    }
}

char *gwfx_raw_http(gwfx *f, const char *request, int answers, int timeout_ms, bool *closed)
{
    cr_assert(!f->tls, "gwfx_raw_http speaks plain HTTP");
    rawws c;
    cr_assert_eq(rawws_connect(&c, f->port, NULL), 0, "connect to %d", f->port);
    cr_assert_eq(rawws_write(&c, request, strlen(request), false), 0);
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    *closed = false;
    long t0 = tclock_ms();
    for (;;) {
        long left = timeout_ms - tclock_since(t0);
        struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        if (n + 1024 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert_not_null(out);
        }
        ssize_t r = recv(c.fd, out + n, cap - n - 1, 0);
        if (r <= 0) { /* the gateway closed it (or reset it: a close too) */
            *closed = true;
            break;
        }
        n += (size_t)r;
        out[n] = 0;
        if (answers && whole_responses(out, n) >= answers)
            break;
    }
    out[n] = 0;
    rawws_close(&c);
    return out;
}

char *gwfx_wait_health(gwfx *f, int want)
{
    char *body = NULL;
    for (int i = 0; i < 300; i++) {
        int status = 0;
        free(body);
        body = gwfx_http(f, "/healthz", NULL, &status);
        if (status == want)
            return body;
        usleep(100 * 1000);
    }
    cr_assert_fail("/healthz did not answer %d in 30 s: %s", want, body);
    return body;
}

char *gwfx_http(gwfx *f, const char *path, const char *post_body, int *status)
{
    return gwfx_call(f, post_body ? "POST" : "GET", path, NULL, post_body, status);
}

st_store *gwfx_open_store(gwfx *f)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/data/store", f->dir);
    st_options o;
    st_options_init(&o);
    o.path = path;
    o.url = f->store_url;
    st_store *s = NULL;
    char err[512] = "";
    cr_assert_eq(st_open(&o, &s, err, sizeof(err)), 0, "cannot open the gateway's store: %s", err);
    return s;
}

void gwfx_rocksdb_only(const char *why)
{
    if (pgfx_on())
        cr_skip_test("RocksDB only: %s", why);
}

char *gwfx_metrics(gwfx *f)
{
    int status;
    char *body = gwfx_http(f, "/metrics", NULL, &status);
    cr_assert_eq(status, 200, "GET /metrics: %d", status);
    /* In place, line by line: `name{node="X"} v` -> `name v`, `name{node="X",l="v"} v`
     * -> `name{l="v"} v`. The output is never longer than the input. */
    char *w = body;
    for (char *r = body; *r;) {
        char *eol = strchr(r, '\n');
        size_t n = eol ? (size_t)(eol - r + 1) : strlen(r);
        char *brace = memchr(r, '{', n);
        if (r[0] != '#' && n > 1) {
            cr_assert(brace && strncmp(brace, "{node=\"", 7) == 0, "a sample without node: %.*s",
                      (int)n, r);
            char *q = strchr(brace + 7, '"');
            size_t head = (size_t)(brace - r);
            memmove(w, r, head);
            char *rest = q + 1; /* '}' or ',' */
            size_t tail = n - (size_t)(rest - r);
            if (*rest == ',') {
                w[head] = '{';
                memmove(w + head + 1, rest + 1, tail - 1);
                w += head + tail;
            } else {
                memmove(w + head, rest + 1, tail - 1);
                w += head + tail - 1;
            }
        } else {
            memmove(w, r, n);
            w += n;
        }
        r += n;
    }
    *w = 0;
    return body;
}

bool gwfx_next_of(gwc_conn *k, enum pr_ev_type t, int ms, pr_event *out)
{
    long t0 = tclock_ms();
    while (tclock_since(t0) < ms) {
        long left = ms - tclock_since(t0);
        int rc = gwc_next(k, (int)(left > 0 ? left : 1), out);
        if (rc == GWC_ETIMEDOUT)
            return false;
        cr_assert_eq(rc, 0, "the session ended: %s (%s)", gwc_strerror(rc), gwc_last_error(k));
        if (out->t == PR_EV_ERR && t != PR_EV_ERR)
            cr_assert_fail("err %.*s: %.*s", (int)out->err_name.n, out->err_name.p,
                           (int)out->err_msg.n, out->err_msg.p);
        if (out->t == t)
            return true;
    }
    return false;
}

pr_event gwfx_expect_of(gwc_conn *k, enum pr_ev_type t)
{
    pr_event ev;
    cr_assert(gwfx_next_of(k, t, GWFX_WAIT, &ev), "no event %d within %d ms", t, GWFX_WAIT);
    return ev;
}

long long gwfx_stat(gwfx *f, const char *group, const char *key)
{
    int status = 0;
    char *body = gwfx_http(f, "/stats", NULL, &status);
    cr_assert_eq(status, 200);
    json_t *j = json_loads(body, 0, NULL);
    json_t *v = json_object_get(json_object_get(j, group), key);
    cr_assert(json_is_integer(v), "/stats has no %s.%s: %s", group, key, body);
    long long n = json_integer_value(v);
    json_decref(j);
    free(body);
    return n;
}

bool gwfx_log_has(gwfx *f, const char *needle)
{
    char path[300], line[4096];
    snprintf(path, sizeof(path), "%s/gw.log", f->dir);
    FILE *l = fopen(path, "r");
    bool found = false;
    while (l && !found && fgets(line, sizeof(line), l))
        found = strstr(line, needle) != NULL;
    if (l)
        fclose(l);
    return found;
}

pr_event gwfx_reply(gwc_conn *k, uint64_t rid, enum pr_ev_type want)
{
    pr_event ev;
    cr_assert(gwfx_next_of(k, want, GWFX_WAIT, &ev), "no reply %d within %d ms", want, GWFX_WAIT);
    cr_assert(ev.has_rid && ev.rid == rid, "the reply of rid %lu", (unsigned long)rid);
    return ev;
}

pr_event gwfx_edit(gwc_conn *k, uint64_t rid, const char *gid, uint64_t mid, uint64_t ver,
                   const char *text, enum pr_ev_type want)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_edit(&sb, rid, gwfx_sl(gid), mid, ver, (pr_body){gwfx_sl(text), false}), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    return gwfx_reply(k, rid, want);
}

pr_event gwfx_recall(gwc_conn *k, uint64_t rid, const char *gid, uint64_t mid, enum pr_ev_type want)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_recall(&sb, rid, gwfx_sl(gid), mid), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    return gwfx_reply(k, rid, want);
}

int gwfx_fill_slow(gwfx *f, gwc_conn *sender, const char *gid, int min, int pause_ms, int drain_ms)
{
    char *body = malloc(60000);
    memset(body, 'x', 60000);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    long t0 = tclock_ms();
    int n = 0;
    static int calls; /* the cids of each call differ: a test may fill again */
    calls++;
    while ((n < min || gwfx_stat(f, "slow_consumers", "switches") == 0) &&
           tclock_since(t0) < 30000) {
        for (int i = 0; i < 20; i++, n++) {
            char cid[32];
            snprintf(cid, sizeof(cid), "m%d-%d", calls, n);
            sb.size = 0;
            pr_enc_send(&sb, PR_NO_RID, gwfx_sl(gid), gwfx_sl(cid),
                        (pr_body){{(uint8_t *)body, 60000}, true});
            gwfx_send(sender, &sb);
            if (pause_ms)
                usleep(pause_ms * 1000);
        }
        pr_event ev;
        while (gwc_next(sender, drain_ms, &ev) == 0)
            ;
    }
    free(body);
    msgpack_sbuffer_destroy(&sb);
    cr_assert_geq(gwfx_stat(f, "slow_consumers", "switches"), 1, "after %d messages", n);
    return n;
}

void gwfx_settle_slow(gwfx *f, gwc_conn *sender, const char *gid)
{
    long t0 = tclock_ms();
    for (;;) {
        long long switches = gwfx_stat(f, "slow_consumers", "switches");
        long long notifies = gwfx_stat(f, "slow_consumers", "notifies");
        gwfx_fill_slow(f, sender, gid, 20, 21, 100);
        if (gwfx_stat(f, "slow_consumers", "switches") == switches &&
            gwfx_stat(f, "slow_consumers", "notifies") == notifies)
            break;
        cr_assert_lt(tclock_since(t0), 30000, "a slow member left notify mode for 30 s");
    }
    cr_log_info("the slow members stayed slow consumers after %ld ms more", tclock_since(t0));
}

uint64_t gwfx_pull_all(gwc_conn *k, const char *gid, uint64_t rid, uint64_t after,
                       void (*each)(const pr_message *m, void *ud), void *ud)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (;;) {
        sb.size = 0;
        pr_enc_pull(&sb, rid, gwfx_sl(gid), false, after, 500);
        pr_event page = gwfx_request(k, &sb, PR_EV_PAGE);
        for (size_t i = 0; i < page.n_items; i++) {
            pr_message m;
            cr_assert_eq(pr_event_message(&page, i, &m), 0);
            cr_assert_eq(m.mid, after + 1, "dense mids");
            after = m.mid;
            each(&m, ud);
        }
        if (!page.more)
            break;
    }
    msgpack_sbuffer_destroy(&sb);
    return after;
}
