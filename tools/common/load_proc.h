/*
 * load_proc: what a server process spends, read from /proc (gw_load and gw_attack).
 * Each returns -1 when the process is gone or the file cannot be read.
 */
#ifndef LOAD_PROC_H
#define LOAD_PROC_H

/* User + system CPU seconds of pid (/proc/PID/stat). */
double load_proc_cpu_s(int pid);
/* The CPU seconds of every process named comm (/proc/PID/comm) now: a database server's
 * postmaster and backends ("postgres"). Those that ended are not counted. */
double load_proc_cpu_of_name(const char *comm);
/* Resident memory of pid in KiB (VmRSS in /proc/PID/status). */
long load_proc_rss_kib(int pid);
/* Open file descriptors of pid (entries of /proc/PID/fd). */
int load_proc_fds(int pid);
/* The process that listens on TCP port (IPv4 or IPv6): its socket's inode from
 * /proc/net/tcp{,6}, then the process holding that inode among /proc/PID/fd. Only
 * processes this user may look into are found. */
int load_proc_pid_of_port(int port);

#endif
