/* Logging: one line per event, with a level; the only place the gateway prints. */
#ifndef GW_LOG_H
#define GW_LOG_H

enum gw_log_level { GW_LOG_ERROR = 0, GW_LOG_WARN, GW_LOG_INFO, GW_LOG_DEBUG };

/* Lines above this level are dropped (default GW_LOG_INFO). */
void gw_log_set_level(enum gw_log_level lvl);
/* Every line names the node from then on (the cluster: whose log is this). */
void gw_log_set_node(const char *name);
/* The calling thread's lines name it from then on: service thread index (0: no name). */
void gw_log_set_thread(unsigned index);
/* Routes libwebsockets' own errors and warnings into this log. */
void gw_log_capture_lws(void);

__attribute__((format(printf, 2, 3))) void gw_log(enum gw_log_level lvl, const char *fmt, ...);

#define gw_err(...) gw_log(GW_LOG_ERROR, __VA_ARGS__)
#define gw_warn(...) gw_log(GW_LOG_WARN, __VA_ARGS__)
#define gw_info(...) gw_log(GW_LOG_INFO, __VA_ARGS__)
#define gw_dbg(...) gw_log(GW_LOG_DEBUG, __VA_ARGS__)

#endif
