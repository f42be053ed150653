/*
 * gw_cli_out: what gw_cli prints on stdout.
 *
 * Text is for people: `[gid #mid] from: body`, with control characters and bytes that are
 * not UTF-8 shown as escapes, so that a message cannot move the cursor or span lines.
 * JSON lines are for scripts: one object per line. A body that is valid UTF-8 text is a
 * JSON string; a bin body, or a str body that is not UTF-8, is base64 with "enc":"base64"
 * (and "bin":true for bin), so that no byte is lost or altered.
 */
#include "gw_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define TEXT_HEX_MAX 32 /* text: bin bodies up to this many bytes are shown in hex */

/* Length of the UTF-8 sequence at p (0 if it is not valid UTF-8) and its code point. */
static size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (b < 0x80) {
        *cp = b;
        return 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
        *cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        *cp = b & 0x0F;
        if (b == 0xE0)
            lo = 0xA0; /* no overlong forms */
        if (b == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        *cp = b & 0x07;
        if (b == 0xF0)
            lo = 0x90;
        if (b == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        *cp = *cp << 6 | (p[i] & 0x3F);
    }
    return len;
}

static bool utf8_valid(pr_slice s)
{
    uint32_t cp;
    for (size_t i = 0, len; i < s.n; i += len)
        if (!(len = utf8_next(s.p + i, s.n - i, &cp)))
            return false;
    return true;
}

/* Code points printed as escapes: C0 and C1 controls, DEL, and the line and paragraph
 * separators, which some readers of JSON and some terminals take for line breaks. */
static bool is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
}

/* A JSON string of valid UTF-8 (check with utf8_valid first). */
static void json_str(pr_slice s)
{
    uint32_t cp;
    putchar('"');
    for (size_t i = 0, len; i < s.n; i += len) {
        len = utf8_next(s.p + i, s.n - i, &cp);
        if (!len) { /* not reached for valid input; keeps the output JSON regardless */
            fputs("\\ufffd", stdout);
            len = 1;
        } else if (cp == '"' || cp == '\\') {
            printf("\\%c", (char)cp);
        } else if (cp == '\n') {
            fputs("\\n", stdout);
        } else if (cp == '\r') {
            fputs("\\r", stdout);
        } else if (cp == '\t') {
            fputs("\\t", stdout);
        } else if (is_control(cp)) {
            printf("\\u%04x", (unsigned)cp);
        } else {
            fwrite(s.p + i, 1, len, stdout);
        }
    }
    putchar('"');
}

static void base64(pr_slice s)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    putchar('"');
    for (size_t i = 0; i < s.n; i += 3) {
        uint32_t v = (uint32_t)s.p[i] << 16;
        if (i + 1 < s.n)
            v |= (uint32_t)s.p[i + 1] << 8;
        if (i + 2 < s.n)
            v |= s.p[i + 2];
        putchar(tab[v >> 18 & 63]);
        putchar(tab[v >> 12 & 63]);
        putchar(i + 1 < s.n ? tab[v >> 6 & 63] : '=');
        putchar(i + 2 < s.n ? tab[v & 63] : '=');
    }
    putchar('"');
}

/* Text for a terminal: printable UTF-8 as it is, everything else escaped. */
static void text_safe(pr_slice s)
{
    uint32_t cp;
    for (size_t i = 0, len; i < s.n; i += len) {
        len = utf8_next(s.p + i, s.n - i, &cp);
        if (!len) {
            printf("\\x%02x", s.p[i]);
            len = 1;
        } else if (cp == '\n') {
            fputs("\\n", stdout);
        } else if (cp == '\t') {
            fputs("\\t", stdout);
        } else if (cp == '\r') {
            fputs("\\r", stdout);
        } else if (cp < 0x20 || cp == 0x7F) {
            printf("\\x%02x", (unsigned)cp);
        } else if (is_control(cp)) { /* terminals obey some C1 controls */
            printf("\\u%04x", (unsigned)cp);
        } else {
            fwrite(s.p + i, 1, len, stdout);
        }
    }
}

static void json_body(pr_body body)
{
    fputs(",\"body\":", stdout);
    if (!body.is_bin && utf8_valid(body.data)) {
        json_str(body.data);
        return;
    }
    base64(body.data);
    fputs(",\"enc\":\"base64\"", stdout);
    if (body.is_bin)
        fputs(",\"bin\":true", stdout);
}

/* A page or changes entry's reactions: ,"reactions":{key:count},"mine":[key,...]. */
static void json_reactions(const pr_message *m)
{
    pr_reaction r;
    bool mine = false;
    if (!m->n_reactions)
        return;
    fputs(",\"reactions\":{", stdout);
    for (size_t i = 0; i < m->n_reactions && !pr_message_reaction(m, i, &r); i++) {
        if (i)
            putchar(',');
        json_str(utf8_valid(r.key) ? r.key : cli_slice("?"));
        printf(":%" PRIu64, r.count);
        mine |= r.mine;
    }
    putchar('}');
    if (!mine)
        return;
    fputs(",\"mine\":[", stdout);
    for (size_t i = 0, n = 0; i < m->n_reactions && !pr_message_reaction(m, i, &r); i++)
        if (r.mine) {
            if (n++)
                putchar(',');
            json_str(utf8_valid(r.key) ? r.key : cli_slice("?"));
        }
    putchar(']');
}

/* The same as text: "  {KEY N*, KEY N}" (* : yours). */
static void text_reactions(const pr_message *m)
{
    pr_reaction r;
    if (!m->n_reactions)
        return;
    fputs("  {", stdout);
    for (size_t i = 0; i < m->n_reactions && !pr_message_reaction(m, i, &r); i++) {
        if (i)
            fputs(", ", stdout);
        text_safe(r.key);
        printf(" %" PRIu64 "%s", r.count, r.mine ? "*" : "");
    }
    putchar('}');
}

void out_message(const cli *c, pr_slice gid, const pr_message *m)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(gid);
        printf(",\"mid\":%" PRIu64 ",\"from\":", m->mid);
        json_str(utf8_valid(m->from) ? m->from : cli_slice("?"));
        printf(",\"ts\":%" PRIu64, m->ts);
        if (m->ver)
            printf(",\"ver\":%" PRIu64, m->ver);
        if (m->cseq)
            printf(",\"cseq\":%" PRIu64, m->cseq);
        if (m->recalled)
            fputs(",\"recalled\":true", stdout);
        else
            json_body(m->body);
        json_reactions(m);
        fputs("}\n", stdout);
        return;
    }
    putchar('[');
    text_safe(gid);
    printf(" #%" PRIu64, m->mid);
    if (m->ver && !m->recalled)
        printf(" edited v%" PRIu64, m->ver);
    fputs("] ", stdout);
    text_safe(m->from);
    fputs(": ", stdout);
    if (m->recalled) {
        fputs("(recalled)", stdout);
    } else if (!m->body.is_bin) {
        text_safe(m->body.data);
    } else if (m->body.data.n <= TEXT_HEX_MAX) {
        printf("<%zu bytes:", m->body.data.n);
        for (size_t i = 0; i < m->body.data.n; i++)
            printf(" %02x", m->body.data.p[i]);
        putchar('>');
    } else {
        printf("<%zu bytes>", m->body.data.n);
    }
    text_reactions(m);
    putchar('\n');
}

void out_reacted(const cli *c, const pr_event *ev)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        printf(",\"mid\":%" PRIu64 ",\"key\":", ev->mid);
        json_str(utf8_valid(ev->key) ? ev->key : cli_slice("?"));
        printf(",\"on\":%s,\"count\":%" PRIu64 ",\"cseq\":%" PRIu64 "%s}\n",
               ev->on ? "true" : "false", ev->count, ev->cseq,
               ev->duplicate ? ",\"duplicate\":true" : "");
        return;
    }
    putchar('[');
    text_safe(ev->gid);
    printf(" #%" PRIu64 "] ", ev->mid);
    text_safe(ev->key);
    printf(" %s: %" PRIu64 " now (cseq %" PRIu64 ")%s\n", ev->on ? "on" : "off", ev->count,
           ev->cseq, ev->duplicate ? ", unchanged" : "");
}

void out_changes_end(const cli *c, pr_slice gid, const pr_event *ev)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(gid);
        printf(",\"upto\":%" PRIu64 ",\"last_cseq\":%" PRIu64 ",\"first_mid\":%" PRIu64, ev->upto,
               ev->last_cseq, ev->first_mid);
        if (ev->changes_gone_before)
            printf(",\"changes_gone_before\":%" PRIu64, ev->changes_gone_before);
        fputs("}\n", stdout);
        return;
    }
    printf("# upto %" PRIu64 " last_cseq %" PRIu64 " first_mid %" PRIu64, ev->upto, ev->last_cseq,
           ev->first_mid);
    if (ev->changes_gone_before)
        printf(" changes_gone_before %" PRIu64, ev->changes_gone_before);
    putchar('\n');
}

void out_group(const cli *c, const pr_group *g)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(g->gid);
        printf(",\"first_mid\":%" PRIu64 ",\"last_mid\":%" PRIu64 ",\"ack\":%" PRIu64
               ",\"unread\":%" PRIu64 "}\n",
               g->first_mid, g->last_mid, g->ack, g->unread);
        return;
    }
    text_safe(g->gid);
    printf("  unread=%" PRIu64 " last_mid=%" PRIu64 " ack=%" PRIu64, g->unread, g->last_mid,
           g->ack);
    if (g->first_mid > 1) /* retention deleted what is below */
        printf(" first_mid=%" PRIu64, g->first_mid);
    putchar('\n');
}

void out_receipts(const cli *c, const pr_event *ev)
{
    pr_slice u;
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        printf(",\"mid\":%" PRIu64 ",\"delivered\":%" PRIu64 ",\"read\":%" PRIu64
               ",\"of\":%" PRIu64,
               ev->mid, ev->delivered, ev->read, ev->of);
        if (ev->has_list) {
            fputs(",\"readers\":[", stdout);
            for (size_t i = 0; i < ev->n_items; i++)
                if (pr_event_reader(ev, i, &u) == 0) {
                    fputs(i ? "," : "", stdout);
                    json_str(u);
                }
            putchar(']');
        }
        fputs("}\n", stdout);
        return;
    }
    text_safe(ev->gid);
    printf(" #%" PRIu64 ": delivered to %" PRIu64 ", read by %" PRIu64 " of %" PRIu64, ev->mid,
           ev->delivered, ev->read, ev->of);
    if (ev->has_list && ev->n_items) {
        fputs(" (", stdout);
        for (size_t i = 0; i < ev->n_items; i++)
            if (pr_event_reader(ev, i, &u) == 0) {
                fputs(i ? ", " : "", stdout);
                text_safe(u);
            }
        putchar(')');
    }
    putchar('\n');
}

/* "3 min ago" and the like. */
static void ago(uint64_t now, uint64_t then)
{
    uint64_t s = now > then ? (now - then) / 1000 : 0;
    if (s < 60)
        printf("%" PRIu64 " s ago", s);
    else if (s < 3600)
        printf("%" PRIu64 " min ago", s / 60);
    else if (s < 86400)
        printf("%" PRIu64 " h ago", s / 3600);
    else
        printf("%" PRIu64 " days ago", s / 86400);
}

void out_presence(const cli *c, const pr_event *ev, uint64_t now)
{
    pr_presence p;
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        printf(",\"online\":%" PRIu64 ",\"of\":%" PRIu64, ev->online, ev->of);
        if (ev->has_list) {
            fputs(",\"members\":[", stdout);
            for (size_t i = 0; i < ev->n_items; i++)
                if (pr_event_presence(ev, i, &p) == 0) {
                    fputs(i ? ",{\"uid\":" : "{\"uid\":", stdout);
                    json_str(p.uid);
                    printf(",\"online\":%s,\"last_seen\":%" PRIu64 "}", p.online ? "true" : "false",
                           p.last_seen);
                }
            putchar(']');
        }
        fputs("}\n", stdout);
        return;
    }
    text_safe(ev->gid);
    printf(": %" PRIu64 " of %" PRIu64 " online\n", ev->online, ev->of);
    for (size_t i = 0; ev->has_list && i < ev->n_items; i++) {
        if (pr_event_presence(ev, i, &p) != 0)
            continue;
        fputs("  ", stdout);
        text_safe(p.uid);
        if (p.online) {
            fputs("  online\n", stdout);
        } else if (!p.last_seen) {
            fputs("  never seen\n", stdout);
        } else {
            fputs("  last seen ", stdout);
            ago(now, p.last_seen);
            putchar('\n');
        }
    }
}

void out_joined(const cli *c, const pr_event *ev)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        printf(",\"joined\":true,\"first_mid\":%" PRIu64 ",\"last_mid\":%" PRIu64
               ",\"ack\":%" PRIu64 "}\n",
               ev->first_mid, ev->last_mid, ev->ack);
        return;
    }
    fputs("joined ", stdout);
    text_safe(ev->gid);
    printf(" (last_mid %" PRIu64 ", ack %" PRIu64 ")\n", ev->last_mid, ev->ack);
}

void out_left(const cli *c, const pr_event *ev)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        fputs(",\"left\":true}\n", stdout);
        return;
    }
    fputs("left ", stdout);
    text_safe(ev->gid);
    putchar('\n');
}

void out_sent(const cli *c, const pr_event *ev)
{
    if (c->o.json) {
        fputs("{\"gid\":", stdout);
        json_str(ev->gid);
        fputs(",\"cid\":", stdout);
        json_str(ev->cid);
        printf(",\"mid\":%" PRIu64 ",\"ts\":%" PRIu64 "}\n", ev->mid, ev->ts);
        return;
    }
    fputs("sent [", stdout);
    text_safe(ev->gid);
    printf(" #%" PRIu64 "]\n", ev->mid);
}

int out_flush(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    cli_err("cannot write the output: %s", strerror(errno));
    return -1;
}
