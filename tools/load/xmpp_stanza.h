/*
 * xmpp_stanza: reads one XMPP-over-WebSocket message (RFC 7395) into the few facts gw_load's
 * XMPP driver acts on (xs_ prefix). Over WebSocket every message is one whole element
 * (a stanza, <open/>, <close/>, <stream:features/>, a SASL element), so each is parsed on its
 * own as a complete document by libexpat (a maintained streaming parser, namespaces on):
 * no stream state is carried from one message to the next.
 *
 * Only what the driver needs is kept (fixed-size fields, longer values cut): the top
 * element's kind and type/id/from, the stream features, MUC status codes, the body's
 * length and first 16 characters, a MAM <result>'s queryid and a <fin>'s complete flag and
 * RSM <last>, and a stanza <error>'s condition.
 *
 * Ownership: an xs_parser is owned by its caller (xs_parser_free); an xs_stanza is a plain
 * value filled by xs_parse, holding no pointers.
 */
#ifndef XMPP_STANZA_H
#define XMPP_STANZA_H

#include <stdbool.h>
#include <stddef.h>

enum {
    XS_E_SYNTAX = -1, /* not well-formed XML (or not one element) */
    XS_E_NOMEM = -2,
};

typedef enum xs_kind {
    XS_OTHER,
    XS_OPEN,     /* <open/> of the framing namespace */
    XS_CLOSE,    /* <close/> */
    XS_FEATURES, /* <stream:features> */
    XS_SUCCESS,  /* SASL success */
    XS_FAILURE,  /* SASL failure */
    XS_IQ,
    XS_PRESENCE,
    XS_MESSAGE,
    XS_STREAM_ERROR, /* <stream:error> */
} xs_kind;

typedef struct xs_stanza {
    xs_kind kind;
    char type[16], id[64], from[192]; /* the top element's attributes ("" when absent) */
    /* features */
    bool mech_plain;       /* SASL PLAIN is offered */
    bool bind;             /* resource binding is offered */
    bool session;          /* a session iq is offered ... */
    bool session_optional; /* ... and may be skipped */
    /* presence from a room (muc#user) */
    bool status110, status201; /* self-presence; the room was just created */
    /* message */
    bool body;          /* a <body> directly in the message */
    size_t body_n;      /* its length in bytes */
    char body_head[17]; /* its first 16 bytes, NUL-terminated */
    bool mam_result;    /* a MAM <result> (urn:xmpp:mam:2) ... */
    char queryid[64];   /* ... of this query */
    /* iq */
    bool fin;           /* a MAM <fin> ... */
    bool complete;      /* ... with complete="true" ... */
    char rsm_last[128]; /* ... and its RSM <last> ("" when the page was empty) */
    /* any stanza */
    bool error;          /* a stanza <error> child */
    char error_cond[48]; /* its condition's name (e.g. "forbidden") */
} xs_stanza;

typedef struct xs_parser xs_parser;

/* NULL when out of memory. */
xs_parser *xs_parser_new(void);
void xs_parser_free(xs_parser *p);

/* Parses one message (n bytes, one whole element) into *out (cleared first): 0, or
 * XS_E_SYNTAX (*out then holds what was read before the error) or XS_E_NOMEM. */
int xs_parse(xs_parser *p, const char *data, size_t n, xs_stanza *out);

#endif
