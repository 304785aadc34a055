/* The plain C baseline of the throughput benchmark: the loopback traffic of
 * cq_throughput (bench_flow: receive credits, a bounded send queue), driven by a
 * hand-written epoll loop over the same verbs. Each pass polls one batch from each
 * CQ, so neither CQ starves the other; when both are empty it arms the CQs not yet
 * armed, polls once more, then sleeps in epoll_wait on the completion channel and
 * reads its events until EAGAIN (acked in batches of 64).
 *
 *   epoll_throughput [-i IN_FLIGHT] [MESSAGES]
 *
 * Defaults: 64 in flight, 100000 messages. Device: $RDMA_ASIO_TEST_DEVICE or rxe0. */
#include "loopback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

enum { ack_batch = 64, poll_batch = 16 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char *argv[])
{
    struct bench_options o = {.messages = 100000, .in_flight = 64};
    if (bench_parse_options(argc, argv, "i:", "epoll_throughput [-i IN_FLIGHT] [MESSAGES]", &o))
        return 2;
    struct ibv_context *ctx = bench_open_device("epoll_throughput");
    if (!ctx)
        return 1;
    struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
    if (!channel || fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK))
        return 1;
    /* [0] a's sends, [1] b's receives */
    struct ibv_cq *cqs[2] = {ibv_create_cq(ctx, 2 * o.in_flight, NULL, channel, 0),
                             ibv_create_cq(ctx, 2 * o.in_flight, NULL, channel, 0)};
    struct bench_loopback lb;
    if (!cqs[0] || !cqs[1] || bench_loopback_init(&lb, ctx, cqs[0], cqs[1], o.in_flight))
        return 1;

    int epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, channel->fd, &ev))
        return 1;

    long events = 0, ack_calls = 0;
    unsigned unacked[2] = {0, 0};
    int armed[2] = {0, 0}, just_armed = 0;
    struct bench_flow flow;
    double start = now();
    if (bench_flow_start(&flow, &lb, o.messages, o.in_flight))
        return 1;
    while (!bench_flow_done(&flow)) {
        struct ibv_wc wc[poll_batch];
        int found = 0;
        for (int i = 0; i < 2; ++i) {
            int n = ibv_poll_cq(cqs[i], poll_batch, wc);
            if (n < 0 || bench_flow_completed(&flow, wc, n))
                return 1;
            found += n;
        }
        if (found) {
            just_armed = 0;
            continue;
        }
        if (!just_armed) { /* arm, then poll once more before sleeping */
            for (int i = 0; i < 2; ++i)
                if (!armed[i]) {
                    if (ibv_req_notify_cq(cqs[i], 0))
                        return 1;
                    armed[i] = 1;
                }
            just_armed = 1;
            continue;
        }
        just_armed = 0;
        if (epoll_wait(epfd, &ev, 1, -1) < 0 && errno != EINTR)
            return 1;
        struct ibv_cq *cq;
        void *cq_ctx;
        while (ibv_get_cq_event(channel, &cq, &cq_ctx) == 0) {
            int i = cq == cqs[0] ? 0 : 1;
            ++events;
            armed[i] = 0;
            if (++unacked[i] >= ack_batch) {
                ibv_ack_cq_events(cq, unacked[i]);
                unacked[i] = 0;
                ++ack_calls;
            }
        }
    }
    double elapsed = now() - start;
    for (int i = 0; i < 2; ++i)
        if (unacked[i])
            ibv_ack_cq_events(cqs[i], unacked[i]);
    printf("plain C epoll loop, %d in flight: %ld messages, %ld completions in %.3f s = %.0f "
           "completions/s, %ld events, %ld ack calls\n",
           o.in_flight, o.messages, flow.sent + flow.received, elapsed,
           (flow.sent + flow.received) / elapsed, events, ack_calls);
    bench_loopback_destroy(&lb);
    ibv_destroy_cq(cqs[0]);
    ibv_destroy_cq(cqs[1]);
    ibv_destroy_comp_channel(channel);
    ibv_close_device(ctx);
    return 0;
}
