/* The plain C baseline of the CQ-scaling benchmark: CQS CQs on one completion
 * channel, every one armed (a pending wait), and traffic on the first CQ only or
 * (-a) on all of them. An active CQ is both CQs of one QP that answers the
 * messages bench_peer sends it, one in flight per lane (see remote.h), so every
 * message needs a wake-up. The loop sleeps in epoll_wait on the channel, reads the
 * events until EAGAIN and serves only the CQ each event names: poll until empty,
 * arm, poll until empty. Events are acked per CQ in batches of 64.
 *
 *   epoll_cq_scaling [-c CQS] [-a] [MESSAGES]
 *
 * Defaults: 1 CQ, 20000 messages (spread over the active CQs). Device:
 * $RDMA_ASIO_TEST_DEVICE or rxe0. */
#include "loopback.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

enum { ack_batch = 64, poll_batch = 16 };

struct lane {
    struct ibv_cq *cq;
    unsigned unacked;
    int armed;
    struct ibv_qp *qp; /* active lanes only */
    struct bench_echo echo;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Polls until empty, arms, polls until empty. */
static int serve(struct lane *l)
{
    struct ibv_wc wc[poll_batch];
    for (;;) {
        int n;
        while ((n = ibv_poll_cq(l->cq, poll_batch, wc)) > 0)
            if (bench_echo_completed(&l->echo, wc, n))
                return -1;
        if (n < 0)
            return -1;
        if (l->armed)
            return 0;
        if (ibv_req_notify_cq(l->cq, 0))
            return -1;
        l->armed = 1;
    }
}

int main(int argc, char *argv[])
{
    struct bench_options o = {.messages = 20000, .cqs = 1};
    if (bench_parse_options(argc, argv, "c:a", "epoll_cq_scaling [-c CQS] [-a] [MESSAGES]", &o))
        return 2;
    int active = o.all_cqs ? o.cqs : 1;
    if (o.messages < active) {
        fprintf(stderr, "epoll_cq_scaling: fewer messages than active CQs\n");
        return 2;
    }
    struct ibv_context *ctx = bench_open_device("epoll_cq_scaling");
    if (!ctx)
        return 1;
    struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_mr *mr = pd ? bench_alloc_buffer(pd) : NULL;
    struct lane *lanes = calloc((size_t)o.cqs, sizeof *lanes);
    uint32_t *qpns = calloc((size_t)active * 2, sizeof *qpns);
    long *totals = calloc((size_t)active, sizeof *totals);
    if (!channel || !mr || !lanes || !qpns || !totals ||
        fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK))
        return 1;
    for (int i = 0; i < o.cqs; ++i) {
        struct lane *l = &lanes[i];
        l->cq = ibv_create_cq(ctx, 2 * bench_lane_window, l, channel, 0);
        if (!l->cq || ibv_req_notify_cq(l->cq, 0))
            return 1;
        l->armed = 1;
        if (i >= active)
            continue;
        l->qp = bench_create_qp(pd, l->cq, l->cq, bench_lane_window);
        if (!l->qp)
            return 1;
        qpns[i] = l->qp->qp_num;
        totals[i] = o.messages / active + (i < o.messages % active);
    }
    struct bench_peer peer;
    if (bench_peer_start(&peer, active, qpns, totals, qpns + active))
        return 1;
    for (int i = 0; i < active; ++i)
        if (bench_connect_qp(ctx, lanes[i].qp, qpns[active + i]) ||
            bench_echo_start(&lanes[i].echo, lanes[i].qp, mr, totals[i]))
            return 1;
    int epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, channel->fd, &ev))
        return 1;

    long events = 0, ack_calls = 0;
    int running = active;
    double start = now();
    if (bench_peer_go(&peer))
        return 1;
    while (running) {
        if (epoll_wait(epfd, &ev, 1, -1) < 0 && errno != EINTR)
            return 1;
        struct ibv_cq *cq;
        void *cq_ctx;
        while (ibv_get_cq_event(channel, &cq, &cq_ctx) == 0) {
            struct lane *l = cq_ctx;
            ++events;
            l->armed = 0;
            if (++l->unacked >= ack_batch) {
                ibv_ack_cq_events(cq, l->unacked);
                l->unacked = 0;
                ++ack_calls;
            }
            if (!l->qp || bench_echo_done(&l->echo))
                continue;
            if (serve(l))
                return 1;
            if (bench_echo_done(&l->echo))
                --running;
        }
    }
    double elapsed = now() - start;
    printf("plain C epoll loop, %d CQs, traffic on %s: %ld messages in %.3f s = %.0f messages/s, "
           "%ld events, %ld ack calls\n",
           o.cqs, o.all_cqs ? "all" : "one", o.messages, elapsed, o.messages / elapsed, events,
           ack_calls);
    if (bench_peer_wait(&peer))
        return 1;
    for (int i = 0; i < o.cqs; ++i) {
        if (lanes[i].qp)
            ibv_destroy_qp(lanes[i].qp);
        if (lanes[i].unacked)
            ibv_ack_cq_events(lanes[i].cq, lanes[i].unacked);
        ibv_destroy_cq(lanes[i].cq);
    }
    bench_free_buffer(mr);
    ibv_dealloc_pd(pd);
    ibv_destroy_comp_channel(channel);
    ibv_close_device(ctx);
    free(lanes);
    free(qpns);
    free(totals);
    return 0;
}
