#include "fixture_feed.h"
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_change(void *ud, const st_change *c, size_t n)
{
    fx_heard *h = ud;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < n && h->n < 256; i++) {
        if (h->only && !(h->only & FX_KIND(c[i].kind)))
            continue;
        fx_heard_change *e = &h->ch[h->n++];
        e->kind = c[i].kind;
        snprintf(e->gid, sizeof(e->gid), "%.*s", (int)c[i].gid.n, c[i].gid.p);
        snprintf(e->uid, sizeof(e->uid), "%.*s", (int)c[i].uid.n, c[i].uid.p);
        snprintf(e->key, sizeof(e->key), "%.*s", (int)c[i].key.n, c[i].key.p ? c[i].key.p : "");
        e->mid = c[i].mid;
        e->ts = c[i].ts;
        e->ack = c[i].ack;
        e->read = c[i].read;
        e->ver = c[i].ver;
        e->cseq = c[i].cseq;
        e->count = c[i].count;
        e->recalled = c[i].recalled;
        e->on = c[i].on;
        e->has_record = c[i].record != NULL;
        e->record_n = c[i].record_n;
        if (c[i].record && c[i].record_n)
            memcpy(e->record, c[i].record, c[i].record_n < 64 ? c[i].record_n : 64);
    }
    pthread_mutex_unlock(&h->mu);
}

st_store *fx_open_listening(const char *where, fx_heard *h, const char *node)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.on_change = on_change;
    o.change_ud = h;
    o.node = node;
    return fx_open_options(&o);
}

size_t fx_heard_count(fx_heard *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void fx_heard_await(fx_heard *h, size_t n)
{
    for (int i = 0; i < 500 && fx_heard_count(h) < n; i++)
        usleep(10 * 1000);
    cr_assert_geq(fx_heard_count(h), n, "heard %zu changes, expected %zu", fx_heard_count(h), n);
}

static void allow_connections(const char *where, bool allow)
{
    char admin[512], db[128], sql[600];
    pgfx_admin_url(where, admin, sizeof(admin), db, sizeof(db));
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS %s", db,
             allow ? "true" : "false");
    pgfx_scalar(admin, sql);
}

void fx_feed_cut(const char *where, const char *node)
{
    allow_connections(where, false);
    char admin[512], db[128], app[300];
    pgfx_admin_url(where, admin, sizeof(admin), db, sizeof(db));
    snprintf(app, sizeof(app), "gw-feed %s", node);
    cr_assert_eq(pgfx_end_connections(admin, app), 1, "the connection of %s ended", app);
}

void fx_feed_uncut(const char *where)
{
    allow_connections(where, true);
}

void fx_feed_done(char *where, st_store *a, st_store *b)
{
    st_close(a);
    st_close(b);
    fx_rmtree(where);
    free(where);
}
