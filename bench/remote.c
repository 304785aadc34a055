#include "remote.h"

#include "loopback.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int bench_echo_start(struct bench_echo *e, struct ibv_qp *qp, struct ibv_mr *mr, long total)
{
    memset(e, 0, sizeof *e);
    e->qp = qp;
    e->mr = mr;
    e->total = total;
    if (bench_post_recv(qp, mr, 0)) {
        fprintf(stderr, "bench: posting a receive failed\n");
        return -1;
    }
    return 0;
}

int bench_echo_completed(struct bench_echo *e, const struct ibv_wc *wc, int n)
{
    for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            fprintf(stderr, "bench: work completion failed: %s\n", ibv_wc_status_str(wc[i].status));
            return -1;
        }
        if (!(wc[i].opcode & IBV_WC_RECV)) {
            ++e->sent;
            continue;
        }
        ++e->received;
        if ((e->received < e->total && bench_post_recv(e->qp, e->mr, 0)) ||
            bench_post_send(e->qp, e->mr, 0)) {
            fprintf(stderr, "bench: posting a work request failed\n");
            return -1;
        }
    }
    return 0;
}

int bench_echo_done(const struct bench_echo *e)
{
    return e->received == e->total && e->sent == e->total;
}

/* The peer may finish before this side has polled its last completions; if it
 * fails instead, this side would wait for messages forever: exit then. */
static pid_t peer_pid;
static volatile sig_atomic_t peer_reaped;
static int peer_status;

static void on_sigchld(int sig)
{
    static const char failed[] = "bench: bench_peer failed\n";
    int status;
    (void)sig;
    if (peer_reaped || waitpid(peer_pid, &status, WNOHANG) != peer_pid)
        return;
    peer_status = status;
    peer_reaped = 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        if (write(2, failed, sizeof failed - 1) < 0) {
        }
        _exit(1);
    }
}

int bench_peer_start(struct bench_peer *p, int lanes, const uint32_t *qpns, const long *totals,
                     uint32_t *peer_qpns)
{
    char path[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - sizeof "bench_peer");
    int to[2], from[2];

    memset(p, 0, sizeof *p);
    if (len <= 0)
        goto fail;
    path[len] = 0;
    strcpy(strrchr(path, '/') + 1, "bench_peer");
    if (pipe(to) || pipe(from))
        goto fail;
    signal(SIGCHLD, on_sigchld);
    p->pid = peer_pid = fork();
    if (p->pid < 0)
        goto fail;
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no peer left behind */
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        execl(path, "bench_peer", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    p->to = fdopen(to[1], "w");
    p->from = fdopen(from[0], "r");
    if (!p->to || !p->from)
        goto fail;
    fprintf(p->to, "%d\n", lanes);
    for (int i = 0; i < lanes; ++i)
        fprintf(p->to, "%u %ld\n", qpns[i], totals[i]);
    if (fflush(p->to))
        goto fail;
    for (int i = 0; i < lanes; ++i)
        if (fscanf(p->from, "%u", &peer_qpns[i]) != 1)
            goto fail;
    return 0;
fail:
    fprintf(stderr, "bench: starting bench_peer failed\n");
    return -1;
}

int bench_peer_go(struct bench_peer *p)
{
    return fputs("go\n", p->to) < 0 || fflush(p->to) ? -1 : 0;
}

int bench_peer_wait(struct bench_peer *p)
{
    int status = 0;

    fclose(p->to);
    fclose(p->from);
    if (!peer_reaped && waitpid(p->pid, &status, 0) == p->pid)
        peer_reaped = 1;
    else if (peer_reaped)
        status = peer_status;
    signal(SIGCHLD, SIG_DFL);
    if (!peer_reaped || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench: bench_peer failed\n");
        return -1;
    }
    return 0;
}
