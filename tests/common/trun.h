/*
 * Running a program from a test: a shell command's output (stdout and whatever the command
 * sends there, e.g. with 2>&1) read whole into the caller's buffer, and its exit status.
 * Header only, like tclock.h, so every test binary has it without building anything more.
 */
#ifndef GW_TEST_TRUN_H
#define GW_TEST_TRUN_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>

/* Runs the command fmt makes (sh -c) and waits for it. Its output goes into out (cap
 * bytes, NUL-terminated; the rest is read and dropped, so it cannot block on a full
 * pipe). Returns its exit code, -1 when it could not be run or was killed by a signal. */
static inline int trun(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int trun(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = 0;
    char drop[4096];
    while (fread(drop, 1, sizeof(drop), p) > 0)
        ;
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
