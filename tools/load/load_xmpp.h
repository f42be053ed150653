/*
 * load_xmpp: what gw_load's two XMPP drivers share (lx_ prefix): an XMPP-over-WebSocket
 * session's sign-in (RFC 7395 framing, SASL PLAIN, resource binding, the session iq when
 * the server asks for it), the names of users and rooms, and sending a stanza.
 *
 *   load_xmpp.c       the sign-in below, and --xmpp fan-out: occupants, senders, rooms
 *   load_xmpp_pull.c  --xmpp with --pull: the MAM catch-up of a returning user
 *   xmpp_stanza.c     the reading of each received message (libexpat)
 *
 * Users are <uid-prefix>u<N> with the password --xmpp-password (the benchmark script
 * registers them); rooms are <uid-prefix>room<N>@<muc>, created by the first to join.
 * A session's nick in a room is its user name, so a room's reflection of a message to
 * its sender is the message from ROOM/<own user>.
 */
#ifndef LOAD_XMPP_H
#define LOAD_XMPP_H

#include "load_run.h"
#include "xmpp_stanza.h"

/* Where a session is in its sign-in. */
enum lx_state { LX_OPENING, LX_AUTH, LX_REOPEN, LX_BIND, LX_SESSION, LX_READY, LX_FAILED };

typedef struct lx_sess {
    enum lx_state state;
    int user;          /* N of <prefix>u<N> */
    char name[40];     /* <prefix>u<N>: the user, and the nick in every room */
    bool need_session; /* the server asked for the session iq (not optional) */
    int rooms_joined;
} lx_sess;

/* The muc service's domain: --xmpp-muc, or conference.<domain>. */
const char *lx_muc(const load_cfg *cfg);
/* Sends one text message (a stanza) built from fmt on s; a failure counts as an error. */
void lx_sendf(load_sess *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The bare room name <prefix>room<r> into buf. */
void lx_room(const load_cfg *cfg, int r, char *buf, size_t n);
/* The room index of a JID <prefix>room<N>@<muc>[/nick], or -1; *nick points at the nick
 * (or "" when none). */
int lx_room_of(const load_cfg *cfg, const char *jid, const char **nick);
/* Starts x's sign-in as user N on s (sends <open/>). */
void lx_begin(load_sess *s, lx_sess *x, int user);
/* Takes st if it belongs to the sign-in (and moves it on): true when consumed. Failures
 * are said on stderr and counted; the state is then LX_FAILED. */
bool lx_sign_in_step(load_sess *s, lx_sess *x, const xs_stanza *st);
/* Parses a received message into st; a message that is not XML is said and counted. */
bool lx_parse(load_run *r, xs_parser *xp, const uint8_t *f, size_t n, xs_stanza *st);
/* Says a stanza error (the first few) and counts it. */
void lx_stanza_error(load_run *r, const char *what, const xs_stanza *st);
/* Joins room r (presence with no history asked for). */
void lx_join(load_sess *s, const lx_sess *x, int r);
/* Makes room r an instant room (the owner's empty configuration form), iq id `id`. */
void lx_instant_room(load_sess *s, int r, const char *id);

/* The drivers: each returns the exit code. */
int load_xmpp(const load_cfg *cfg);      /* load_xmpp.c: fan-out and durable sends */
int load_xmpp_pull(const load_cfg *cfg); /* load_xmpp_pull.c: the MAM catch-up */

#endif
