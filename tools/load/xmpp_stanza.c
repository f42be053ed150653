/*
 * xmpp_stanza: one RFC 7395 message read by libexpat into an xs_stanza (see the header).
 * The parser is created once with namespace processing (names arrive as "NS local") and
 * reset before each message, which is a whole document of its own.
 */
#include "xmpp_stanza.h"

#include <expat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NS_FRAMING "urn:ietf:params:xml:ns:xmpp-framing"
#define NS_STREAMS "http://etherx.jabber.org/streams"
#define NS_SASL "urn:ietf:params:xml:ns:xmpp-sasl"
#define NS_BIND "urn:ietf:params:xml:ns:xmpp-bind"
#define NS_SESSION "urn:ietf:params:xml:ns:xmpp-session"
#define NS_MUC_USER "http://jabber.org/protocol/muc#user"
#define NS_MAM "urn:xmpp:mam:2"
#define NS_RSM "http://jabber.org/protocol/rsm"
#define NS_STANZAS "urn:ietf:params:xml:ns:xmpp-stanzas"

/* What character data is being collected for. */
enum capture { CAP_NONE, CAP_MECH, CAP_BODY, CAP_LAST };

struct xs_parser {
    XML_Parser x;
    xs_stanza *out;
    int depth;
    /* Where in the tree: set when the element opens, cleared when it closes. */
    bool in_session, in_fin, in_fin_set, in_error, in_muc_x;
    int error_depth;
    enum capture cap;
    char text[128];
    size_t text_n;
};

/* Splits "NS local" (expat's form with ' ' as separator) into its two parts. */
static const char *split(const char *name, size_t *ns_n)
{
    const char *sp = strrchr(name, ' ');
    if (!sp) {
        *ns_n = 0;
        return name;
    }
    *ns_n = (size_t)(sp - name);
    return sp + 1;
}

static bool ns_is(const char *name, size_t ns_n, const char *ns)
{
    return strlen(ns) == ns_n && memcmp(name, ns, ns_n) == 0;
}

static const char *attr(const XML_Char **atts, const char *key)
{
    for (int i = 0; atts[i]; i += 2)
        if (strcmp(atts[i], key) == 0)
            return atts[i + 1];
    return NULL;
}

/* Copies src into a fixed field, cut to fit. */
static void copy(char *dst, size_t cap, const char *src)
{
    if (!src)
        return;
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void top(xs_parser *p, const char *name, size_t ns_n, const char *local,
                const XML_Char **atts)
{
    xs_stanza *o = p->out;
    if (ns_is(name, ns_n, NS_FRAMING))
        o->kind = strcmp(local, "open") == 0    ? XS_OPEN
                  : strcmp(local, "close") == 0 ? XS_CLOSE
                                                : XS_OTHER;
    else if (ns_is(name, ns_n, NS_STREAMS))
        o->kind = strcmp(local, "features") == 0 ? XS_FEATURES
                  : strcmp(local, "error") == 0  ? XS_STREAM_ERROR
                                                 : XS_OTHER;
    else if (ns_is(name, ns_n, NS_SASL))
        o->kind = strcmp(local, "success") == 0   ? XS_SUCCESS
                  : strcmp(local, "failure") == 0 ? XS_FAILURE
                                                  : XS_OTHER;
    else /* stanzas: jabber:client, or no namespace at all from a lax server */
        o->kind = strcmp(local, "iq") == 0         ? XS_IQ
                  : strcmp(local, "presence") == 0 ? XS_PRESENCE
                  : strcmp(local, "message") == 0  ? XS_MESSAGE
                                                   : XS_OTHER;
    copy(o->type, sizeof(o->type), attr(atts, "type"));
    copy(o->id, sizeof(o->id), attr(atts, "id"));
    copy(o->from, sizeof(o->from), attr(atts, "from"));
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    xs_parser *p = ud;
    xs_stanza *o = p->out;
    size_t ns_n;
    const char *local = split(name, &ns_n);
    int d = ++p->depth;
    if (d == 1) {
        top(p, name, ns_n, local, atts);
        return;
    }
    if (o->kind == XS_FEATURES) {
        if (ns_is(name, ns_n, NS_SASL) && strcmp(local, "mechanism") == 0)
            p->cap = CAP_MECH;
        else if (ns_is(name, ns_n, NS_BIND) && strcmp(local, "bind") == 0)
            o->bind = true;
        else if (ns_is(name, ns_n, NS_SESSION) && strcmp(local, "session") == 0)
            o->session = p->in_session = true;
        else if (p->in_session && strcmp(local, "optional") == 0)
            o->session_optional = true;
    } else if (d == 2 && strcmp(local, "error") == 0 && !ns_is(name, ns_n, NS_MAM)) {
        o->error = p->in_error = true;
        p->error_depth = d;
    } else if (p->in_error && d == p->error_depth + 1 && ns_is(name, ns_n, NS_STANZAS) &&
               !o->error_cond[0] && strcmp(local, "text") != 0) {
        copy(o->error_cond, sizeof(o->error_cond), local);
    } else if (o->kind == XS_PRESENCE) {
        if (d == 2 && ns_is(name, ns_n, NS_MUC_USER) && strcmp(local, "x") == 0)
            p->in_muc_x = true;
        else if (p->in_muc_x && d == 3 && strcmp(local, "status") == 0) {
            const char *code = attr(atts, "code");
            o->status110 |= code && strcmp(code, "110") == 0;
            o->status201 |= code && strcmp(code, "201") == 0;
        }
    } else if (o->kind == XS_MESSAGE && d == 2) {
        if (strcmp(local, "body") == 0 && !ns_is(name, ns_n, NS_MAM)) {
            o->body = true;
            p->cap = CAP_BODY;
        } else if (ns_is(name, ns_n, NS_MAM) && strcmp(local, "result") == 0) {
            o->mam_result = true;
            copy(o->queryid, sizeof(o->queryid), attr(atts, "queryid"));
        }
    } else if (o->kind == XS_IQ) {
        if (d == 2 && ns_is(name, ns_n, NS_MAM) && strcmp(local, "fin") == 0) {
            const char *c = attr(atts, "complete");
            o->fin = p->in_fin = true;
            o->complete = c && (strcmp(c, "true") == 0 || strcmp(c, "1") == 0);
        } else if (p->in_fin && d == 3 && ns_is(name, ns_n, NS_RSM) && strcmp(local, "set") == 0)
            p->in_fin_set = true;
        else if (p->in_fin_set && d == 4 && strcmp(local, "last") == 0)
            p->cap = CAP_LAST;
    }
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    (void)name;
    xs_parser *p = ud;
    xs_stanza *o = p->out;
    int d = p->depth--;
    switch (p->cap) {
    case CAP_MECH:
        if (p->text_n == 5 && memcmp(p->text, "PLAIN", 5) == 0)
            o->mech_plain = true;
        break;
    case CAP_LAST: copy(o->rsm_last, sizeof(o->rsm_last), p->text); break;
    case CAP_BODY:
    case CAP_NONE: break;
    }
    p->cap = CAP_NONE;
    p->text_n = 0;
    p->text[0] = 0;
    if (d == 2) {
        p->in_session = p->in_fin = p->in_muc_x = false;
        if (d == p->error_depth)
            p->in_error = false;
    } else if (d == 3) {
        p->in_fin_set = false;
    }
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    xs_parser *p = ud;
    if (p->cap == CAP_NONE || len <= 0)
        return;
    if (p->cap == CAP_BODY) {
        xs_stanza *o = p->out;
        size_t have = o->body_n < 16 ? o->body_n : 16, take = 16 - have;
        if (take > (size_t)len)
            take = (size_t)len;
        memcpy(o->body_head + have, s, take);
        o->body_head[have + take] = 0;
        o->body_n += (size_t)len;
        return;
    }
    size_t take = sizeof(p->text) - 1 - p->text_n;
    if (take > (size_t)len)
        take = (size_t)len;
    memcpy(p->text + p->text_n, s, take);
    p->text_n += take;
    p->text[p->text_n] = 0;
}

xs_parser *xs_parser_new(void)
{
    xs_parser *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->x = XML_ParserCreateNS(NULL, ' ');
    if (!p->x) {
        free(p);
        return NULL;
    }
    return p;
}

void xs_parser_free(xs_parser *p)
{
    if (!p)
        return;
    XML_ParserFree(p->x);
    free(p);
}

int xs_parse(xs_parser *p, const char *data, size_t n, xs_stanza *out)
{
    memset(out, 0, sizeof(*out));
    /* A reset parser has no handlers: set again for each message. */
    if (!XML_ParserReset(p->x, NULL))
        return XS_E_NOMEM;
    XML_SetUserData(p->x, p);
    XML_SetElementHandler(p->x, on_start, on_end);
    XML_SetCharacterDataHandler(p->x, on_text);
    p->out = out;
    p->depth = 0;
    p->in_session = p->in_fin = p->in_fin_set = p->in_error = p->in_muc_x = false;
    p->error_depth = 0;
    p->cap = CAP_NONE;
    p->text_n = 0;
    p->text[0] = 0;
    if (n > (size_t)INT32_MAX)
        return XS_E_SYNTAX;
    if (XML_Parse(p->x, data, (int)n, 1) != XML_STATUS_OK)
        return XML_GetErrorCode(p->x) == XML_ERROR_NO_MEMORY ? XS_E_NOMEM : XS_E_SYNTAX;
    return 0;
}
