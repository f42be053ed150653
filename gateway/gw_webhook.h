/*
 * The unread webhook (docs/API.md, "Unread webhook"): the application's backend is told
 * that a member has not read a group's message some time after it was stored, so that
 * it can send a mobile push. Off without --webhook-url. Two parts, each in its own file:
 *
 *   gw_unread.c  who is to be told. Each message this node stored, and each ack its
 *                sessions made that left messages unread, is looked at again
 *                --webhook-delay later against the members' stored acks. The store is
 *                the truth whichever node a member is on, so the answer is right in a
 *                cluster; and the node that stored a message is the one that tells of it,
 *                so nodes do not tell the same thing twice.
 *   gw_webhook.c the delivery. A bounded queue of events (full: dropped and counted, the
 *                gateway never waits for it), sent in batches by HTTP POST with libcurl's
 *                multi interface on the gateway's libev loop, signed with HMAC-SHA256
 *                over timestamp and body, and retried with backoff until the receiver
 *                answers 2xx: at least once, each event with an id for deduplication.
 *
 * One event per member and group until the member acks: it tells of the member's first
 * unread message (ack + 1), and its id is made of (group, member, that mid), so whoever
 * makes it again (a retry, an ack's check, another node) makes the same id.
 *
 * Both run on the service thread; the server makes them once its loop exists and frees
 * them before the loop goes.
 */
#ifndef GW_WEBHOOK_H
#define GW_WEBHOOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct gw_server gw_server;
typedef struct gw_unread gw_unread;
typedef struct gw_webhook gw_webhook;

/* ---- who is to be told (gw_unread.c) ------------------------------------------------ */

gw_unread *gw_unread_new(gw_server *srv);
void gw_unread_free(gw_unread *u); /* NULL is a no-op */
/* This node stored gid's message mid (a session's send or the API's; not a duplicate).
 * u may be NULL (no webhook): nothing happens. */
void gw_unread_stored(gw_unread *u, const char *gid, uint64_t mid);
/* A session of uid acked gid up to ack while the group's last mid is last_mid. Messages
 * are left unread (ack < last_mid): the member is looked at again after the delay. */
void gw_unread_acked(gw_unread *u, const char *gid, const char *uid, uint64_t ack,
                     uint64_t last_mid);

/* ---- the delivery (gw_webhook.c) ---------------------------------------------------- */

/* Starts the delivery to srv->cfg.webhook_url on srv->loop. NULL (logged) on failure. */
gw_webhook *gw_webhook_new(gw_server *srv);
/* Stops: a POST under way is abandoned, and what is not delivered is logged as lost. */
void gw_webhook_free(gw_webhook *w);
/* Queues one event (takes the reference): true, or false when it was dropped (the queue
 * full: counted; or no webhook). */
bool gw_webhook_push(gw_webhook *w, json_t *event);

#endif
