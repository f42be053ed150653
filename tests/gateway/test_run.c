/*
 * The README's run command from this checkout: tools/run.sh in the background on a free
 * port and a fresh data folder, then /healthz and the demo page over https with the
 * certificate it made, then a graceful stop.
 */
#include "gwfx.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A port nobody listens on, below the ephemeral range (32768-60999 by default): a port of
 * that range may be taken by any outgoing connection before run.sh's gateway binds it. */
static int free_port(void)
{
    int low = 32768;
    FILE *r = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (r) {
        if (fscanf(r, "%d", &low) != 1)
            low = 32768;
        fclose(r);
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    for (int i = 0; i < 200; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                .sin_port =
                                    htons(low > 11000 ? 10000 + rand() % (low - 10000) : 0)};
        socklen_t n = sizeof(a);
        int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        getsockname(fd, (struct sockaddr *)&a, &n);
        close(fd);
        if (ok)
            return ntohs(a.sin_port);
    }
    cr_assert_fail("no free port below %d", low);
    return 0;
}

static int curl_status(const char *cert, int port, const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "curl -s -m 5 -o /dev/null -w '%%{http_code}' --cacert %s https://localhost:%d%s",
             cert, port, path);
    FILE *p = popen(cmd, "r");
    int status = 0;
    if (fscanf(p, "%d", &status) != 1)
        status = 0;
    pclose(p);
    return status;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

/* tools/run.sh in the background on PORT with DATA, its output in DIR/run.log. */
static pid_t start_run(const char *dir, const char *data, int port)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        char log[400];
        snprintf(log, sizeof(log), "%s/run.log", dir);
        FILE *l = freopen(log, "w", stdout);
        (void)l;
        dup2(1, 2);
        setenv("GW_PORT", port_s, 1);
        setenv("GW_DATA", data, 1);
        execl("/bin/bash", "bash", GW_SOURCE_DIR "/tools/run.sh", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for /healthz over https: 200 when up; 0 when run.sh exited because the port was
 * taken meanwhile (to try another); -1 when it never answered; fails the test when it
 * exited for anything else. */
static int wait_healthz(pid_t pid, const char *dir, const char *cert, int port)
{
    /* It may build first: give it time, but not forever. */
    time_t until = time(NULL) + 540;
    while (time(NULL) < until) {
        int st, status;
        if (waitpid(pid, &st, WNOHANG) != 0) {
            char log[400], tail[2001];
            snprintf(log, sizeof(log), "%s/run.log", dir);
            gwfx_file_tail(log, tail, sizeof(tail));
            if (strstr(tail, "Address already in use"))
                return 0;
            cr_assert_fail("run.sh exited early (status %d); its output ends with:\n%s", st, tail);
        }
        if (access(cert, R_OK) == 0 && (status = curl_status(cert, port, "/healthz")) == 200)
            return status;
        usleep(200 * 1000);
    }
    return -1;
}

Test(run, the_readme_run_command_serves_https, .timeout = 600)
{
    gwfx_rocksdb_only("the README's run command is the embedded default");
    char dir[256], data[300], cert[340];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/gw-run-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(cert, sizeof(cert), "%s/tls/cert.pem", data);
    /* The port is free when chosen, but run.sh may build for a while before the gateway
     * binds it, and meanwhile any connection on the machine may take it as its local
     * port: a bind that finds it taken is tried again on another (at most 3 times). */
    int port = 0, status = 0;
    pid_t pid = -1;
    for (int attempt = 0; attempt < 3 && status == 0; attempt++) {
        port = free_port();
        pid = start_run(dir, data, port);
        status = wait_healthz(pid, dir, cert, port);
    }
    cr_assert_eq(status, 200, "no https /healthz from the run command (see %s/run.log)", dir);
    cr_assert_eq(curl_status(cert, port, "/"), 200, "the demo page");
    /* run.sh exec'd the gateway: the same pid stops gracefully. */
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gateway exit status %d", st);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
