/* The plain C baseline: the same loopback traffic as cq_throughput, driven by a
 * hand-written epoll loop over the same verbs (poll, arm, poll, epoll_wait, read
 * events until EAGAIN, ack in batches of 64).
 *
 *   epoll_throughput [MESSAGES]      device: $RDMA_ASIO_TEST_DEVICE or rxe0 */
#include "loopback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

enum { window = 64, ack_batch = 64 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char *argv[])
{
    long total = argc > 1 ? atol(argv[1]) : 100000;
    const char *name = getenv("RDMA_ASIO_TEST_DEVICE") ? getenv("RDMA_ASIO_TEST_DEVICE") : "rxe0";
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = NULL;
    for (int i = 0; list && list[i]; ++i)
        if (!strcmp(ibv_get_device_name(list[i]), name))
            ctx = ibv_open_device(list[i]);
    if (!ctx) {
        fprintf(stderr, "epoll_throughput: cannot open %s\n", name);
        return 1;
    }
    struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
    fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
    struct ibv_cq *cqs[2] = {ibv_create_cq(ctx, 4 * window, NULL, channel, 0),
                             ibv_create_cq(ctx, 4 * window, NULL, channel, 0)};
    struct bench_loopback lb;
    if (!cqs[0] || !cqs[1] || bench_loopback_init(&lb, ctx, cqs[0], cqs[1], window))
        return 1;

    int epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    epoll_ctl(epfd, EPOLL_CTL_ADD, channel->fd, &ev);

    long posted = 0, sent = 0, received = 0, events = 0, ack_calls = 0;
    unsigned unacked[2] = {0, 0};
    int armed[2] = {0, 0};
    for (int i = 0; i < 2 * window; ++i)
        bench_post_recv(&lb, (unsigned long long)i);
    for (; posted < window && posted < total; ++posted)
        bench_post_send(&lb, (unsigned long long)posted);

    double start = now();
    int just_armed = 0;
    while (sent < total || received < total) {
        struct ibv_wc wc[16];
        int found = 0, n;
        while ((n = ibv_poll_cq(cqs[0], 16, wc)) > 0) {
            found += n;
            sent += n;
            for (int i = 0; i < n && posted < total; ++i)
                bench_post_send(&lb, (unsigned long long)posted++);
        }
        while ((n = ibv_poll_cq(cqs[1], 16, wc)) > 0) {
            found += n;
            received += n;
            for (int i = 0; i < n; ++i)
                bench_post_recv(&lb, wc[i].wr_id);
        }
        if (found) {
            just_armed = 0;
            continue;
        }
        if (!just_armed) { /* arm, then poll once more before sleeping */
            for (int i = 0; i < 2; ++i)
                if (!armed[i]) {
                    ibv_req_notify_cq(cqs[i], 0);
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
    printf("plain C epoll loop: %ld completions in %.3f s = %.0f completions/s, %ld events, "
           "%ld ack calls\n",
           sent + received, elapsed, (sent + received) / elapsed, events, ack_calls);
    bench_loopback_destroy(&lb);
    ibv_destroy_cq(cqs[0]);
    ibv_destroy_cq(cqs[1]);
    ibv_destroy_comp_channel(channel);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
