/* load_proc: a server's CPU, memory, descriptors and pid, from /proc; see load_proc.h. */
#include "load_proc.h"

#include <ctype.h>
#include <stdbool.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double load_proc_cpu_s(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, stt = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt) != 2)
        return -1;
    return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

long load_proc_rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int load_proc_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The inode of the socket listening on port (state 0A), or 0. */
static unsigned long listen_inode(const char *table, int port)
{
    FILE *f = fopen(table, "r");
    char line[512];
    unsigned long inode = 0;
    while (f && !inode && fgets(line, sizeof(line), f)) {
        char local[128];
        unsigned st = 0, p = 0;
        unsigned long ino = 0;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*d: %127s %*s %x %*s %*s %*s %*d %*d %lu", local, &st, &ino) != 3)
            continue;
        char *colon = strrchr(local, ':');
        if (colon && sscanf(colon + 1, "%x", &p) == 1 && (int)p == port && st == 0x0A)
            inode = ino;
    }
    if (f)
        fclose(f);
    return inode;
}

int load_proc_pid_of_port(int port)
{
    unsigned long inode = listen_inode("/proc/net/tcp", port);
    if (!inode)
        inode = listen_inode("/proc/net/tcp6", port);
    if (!inode)
        return -1;
    char want[48];
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    DIR *procs = opendir("/proc");
    int found = -1;
    for (struct dirent *p; procs && found < 0 && (p = readdir(procs));) {
        if (!isdigit((unsigned char)p->d_name[0]))
            continue;
        char dir[300];
        snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
        DIR *fds = opendir(dir);
        for (struct dirent *e; fds && found < 0 && (e = readdir(fds));) {
            char link[600], target[64];
            snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
            ssize_t n = readlink(link, target, sizeof(target) - 1);
            if (n > 0) {
                target[n] = 0;
                if (!strcmp(target, want))
                    found = atoi(p->d_name);
            }
        }
        if (fds)
            closedir(fds);
    }
    if (procs)
        closedir(procs);
    return found;
}

double load_proc_cpu_of_name(const char *comm)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    double sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[300], name[64] = "";
        snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool same = fgets(name, sizeof(name), f) && (name[strcspn(name, "\n")] = 0, 1) &&
                    strcmp(name, comm) == 0;
        fclose(f);
        double s = same ? load_proc_cpu_s(atoi(e->d_name)) : -1;
        if (s > 0)
            sum += s;
    }
    closedir(d);
    return sum;
}
