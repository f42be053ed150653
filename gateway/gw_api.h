/*
 * The server API (gw_api.c): JSON over HTTP under /api/v1/ for application backends,
 * behind API keys (docs/API.md). gw_http.c hands it the requests under that path; each
 * connection's state is a gw_api_conn inside gw_http.c's per-connection state.
 */
#ifndef GW_API_H
#define GW_API_H

#include <jansson.h>
#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct gw_server gw_server;
typedef struct gw_api gw_api;
typedef struct api_job api_job;

/* One API request on its HTTP connection. */
typedef struct gw_api_conn {
    struct lws *wsi; /* NULL once released */
    char path[512];
    char method[8];
    bool authorized;
    bool routed; /* started: it is never started twice */
    char *body;  /* POST body so far (malloc'd) */
    size_t body_n;
    api_job *job;  /* its store job under way, or NULL */
    bool answered; /* status and answer are set: write them when writable */
    unsigned status;
    json_t *answer;
} gw_api_conn;

/* Reads the keys of --api-key-file (NULL: the API is off); srv->api. 0 or -1 (logged). */
int gw_api_load(gw_server *srv, const char *path);
void gw_api_free(gw_api *a);

/* True for paths the API answers. */
bool gw_api_path(const char *path);
/* LWS_CALLBACK_HTTP of an API path: checks the key; starts a request that takes no body
 * (a POST starts at gw_api_body_done). 1 for a POST (its body follows), else 0. */
int gw_api_begin(gw_server *srv, gw_api_conn *c, struct lws *wsi, const char *path,
                 const char *method);
/* LWS_CALLBACK_HTTP_BODY and _COMPLETION. */
int gw_api_body(gw_server *srv, gw_api_conn *c, const void *in, size_t len);
void gw_api_body_done(gw_server *srv, gw_api_conn *c, struct lws *wsi);
/* The answer, once there is one: its status and JSON text (malloc'd). */
bool gw_api_ready(const gw_api_conn *c, unsigned *status, char **json);
/* The connection is done or gone: its job (if any) answers nobody. */
void gw_api_release(gw_api_conn *c);

#endif
