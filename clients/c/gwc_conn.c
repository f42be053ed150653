/*
 * gwc_conn: the libwebsockets side of a gwc connection: the protocol callback that
 * reassembles received messages, sends queued frames one per WRITEABLE, and follows a
 * connection through its handshake, close and destruction.
 *
 * The wsi finds its gwc_conn through lws' opaque user data; gwc.c clears it before freeing
 * a gwc_conn, and WSI_DESTROY clears gwc_conn.wsi, so neither side outlives the other.
 */
#include "gwc_internal.h"

#include <openssl/x509.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gwc_set_err(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

void gwc_queue_push(gwc_queue *q, gwc_frame *f)
{
    f->next = NULL;
    if (q->tail)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
}

gwc_frame *gwc_queue_pop(gwc_queue *q)
{
    gwc_frame *f = q->head;
    if (f && !(q->head = f->next))
        q->tail = NULL;
    return f;
}

void gwc_queue_clear(gwc_queue *q)
{
    gwc_frame *f;
    while ((f = gwc_queue_pop(q)))
        free(f);
}

static void mark_closed(gwc_conn *k)
{
    if (k->state == GWC_ST_CONNECTING) {
        k->state = GWC_ST_FAILED;
    } else if (k->state == GWC_ST_OPEN) {
        k->state = GWC_ST_CLOSED;
        if (k->close_code < 0)
            k->close_code = 0; /* dropped without a close frame */
    }
    free(k->rx); /* a message cut off by the close is never delivered */
    k->rx = NULL;
    k->rx_cap = 0;
    gwc_mark_ready(k);
}

/* Appends one RECEIVE fragment; queues the message once its last fragment is in. */
static int on_receive(gwc_conn *k, struct lws *wsi, const void *in, size_t len)
{
    size_t have = k->rx && !lws_is_first_fragment(wsi) ? k->rx->len : 0;
    /* lws hands out a message in pieces of at most its rx buffer; what remains of the
     * current WebSocket frame is known up front, so size the buffer for it at once. */
    size_t want = have + len + (size_t)lws_remaining_packet_payload(wsi);
    if (want > k->ctx->max_frame) {
        gwc_set_err(k->err, sizeof k->err,
                    "frame of %zu+ bytes over max_frame %zu: closed with 1009", want,
                    k->ctx->max_frame);
        lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, NULL, 0);
        return -1;
    }
    if (!k->rx || want > k->rx_cap) {
        size_t cap = k->rx && want < 2 * k->rx_cap ? 2 * k->rx_cap : want;
        if (cap > k->ctx->max_frame)
            cap = k->ctx->max_frame;
        gwc_frame *f = realloc(k->rx, sizeof *f + cap);
        if (!f) {
            gwc_set_err(k->err, sizeof k->err, "out of memory for a %zu byte frame", want);
            return -1;
        }
        k->rx = f;
        k->rx_cap = cap;
    }
    k->rx->off = 0;
    k->rx->text = false;
    if (len)
        memcpy(k->rx->data + have, in, len);
    k->rx->len = have + len;
    if (!lws_is_final_fragment(wsi))
        return 0;
    gwc_queue_push(&k->in, k->rx);
    k->rx = NULL;
    k->rx_cap = 0;
    k->frames_in++;
    gwc_mark_ready(k);
    return 0;
}

/* Sends one queued frame per WRITEABLE, as lws wants, then the close once all are out. */
static int on_writeable(gwc_conn *k, struct lws *wsi)
{
    gwc_frame *f = gwc_queue_pop(&k->out);
    if (!f) {
        /* lws calls WRITEABLE again while it awaits the close ack: -1 then would drop it */
        if (!k->close_requested || k->close_sent)
            return 0;
        k->close_sent = true;
        lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
        return -1; /* lws sends the close frame and waits for the server's ack */
    }
    int n = lws_write(wsi, f->data + f->off, f->len, f->text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY);
    size_t len = f->len;
    free(f);
    if (n < 0 || (size_t)n < len) {
        gwc_set_err(k->err, sizeof k->err, "write of a %zu byte frame failed", len);
        return -1;
    }
    k->frames_out++;
    if (k->out.head || k->close_requested)
        lws_callback_on_writable(wsi);
    return 0;
}

/* When a subprotocol was asked for, insist on it: lws 4.1 accepts a reply without one. */
static int check_subprotocol(gwc_conn *k, struct lws *wsi)
{
    const char *want = k->ctx->subprotocol;
    char got[64] = "";
    if (!want)
        return 0;
    if (lws_hdr_copy(wsi, got, (int)sizeof got, WSI_TOKEN_PROTOCOL) > 0 && !strcmp(got, want))
        return 0;
    gwc_set_err(k->err, sizeof k->err, "server selected subprotocol \"%s\", not \"%s\"", got, want);
    return -1;
}

static int gwc_lws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                            size_t len)
{
    gwc_conn *k;
    switch (reason) {
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
    case LWS_CALLBACK_CLIENT_RECEIVE:
    case LWS_CALLBACK_CLIENT_WRITEABLE:
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
    case LWS_CALLBACK_CLIENT_CLOSED:
    case LWS_CALLBACK_WSI_DESTROY: break;
    default: return 0;
    }
    /* NULL once gwc_close has let go of this wsi while lws finishes it: end it quietly. */
    if (!(k = lws_get_opaque_user_data(wsi))) {
        bool io = reason == LWS_CALLBACK_CLIENT_WRITEABLE || reason == LWS_CALLBACK_CLIENT_RECEIVE;
        return io ? -1 : 0;
    }

    switch (reason) {
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
        /* lws only reports "SSL err 1" for a refused certificate: keep OpenSSL's reason. It
         * accepts what the LCCSCF_ALLOW_* flags allow before it asks us; 0 leaves its verdict. */
        if (!len && !k->err[0])
            gwc_set_err(k->err, sizeof k->err, "server certificate refused: %s",
                        X509_verify_cert_error_string(X509_STORE_CTX_get_error(user)));
        return 0;
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH: return check_subprotocol(k, wsi);
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        k->state = GWC_ST_OPEN;
        gwc_mark_ready(k);
        if (k->out.head)
            lws_callback_on_writable(wsi);
        return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        if (!k->err[0]) /* keep a more precise reason set earlier, e.g. the subprotocol */
            gwc_set_err(k->err, sizeof k->err, "%.*s", in ? (int)strnlen(in, len) : 6,
                        in ? (const char *)in : "failed");
        mark_closed(k);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE: return on_receive(k, wsi, in, len);
    case LWS_CALLBACK_CLIENT_WRITEABLE: return on_writeable(k, wsi);
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE: {
        const uint8_t *p = in;
        k->close_code = len >= 2 ? p[0] << 8 | p[1] : 0;
        if (len > 2) /* the server's words, e.g. "unauthorized: token expired" */
            snprintf(k->close_reason, sizeof k->close_reason, "%.*s", (int)(len - 2), p + 2);
        mark_closed(k);
        return 0; /* lws answers with its close ack by itself */
    }
    case LWS_CALLBACK_CLIENT_CLOSED: mark_closed(k); return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        if (k->wsi == wsi)
            k->wsi = NULL;
        if (k->state == GWC_ST_CONNECTING && !k->err[0])
            gwc_set_err(k->err, sizeof k->err, "connection closed before the handshake completed");
        mark_closed(k);
        return 0;
    default: return 0;
    }
}

/* lws keeps a pointer to this array for the lifetime of every context. */
const struct lws_protocols gwc_protocols[] = {
    /* 64 KiB receive pieces: a batch frame arrives in a few callbacks, not sixteen. */
    {"gwc", gwc_lws_callback, 0, 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};
