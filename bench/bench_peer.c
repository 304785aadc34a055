/* The sending side of the CQ-scaling benchmark (see remote.h), started by
 * epoll_cq_scaling and cq_scaling. On stdin: the count of lanes, then per lane
 * the measured side's QP number and its count of messages; on stdout: its own QP
 * numbers, one a line. After "go" on stdin it sends on every lane, one message in
 * flight, the next only when the answer to the last is in, sleeping on one
 * completion channel (blocking ibv_get_cq_event) when its one CQ is empty. Exits
 * 0 when every lane has its answers. */
#include "loopback.h"
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { poll_batch = 16 };

struct lane {
    struct ibv_qp *qp;
    uint32_t remote;
    long total, posted, sent, answers;
};

/* The next message, once the last one is answered and the send queue has room. */
static int send_next(struct lane *l, struct ibv_mr *mr, unsigned long long id)
{
    if (l->posted == l->total || l->posted > l->answers ||
        l->posted - l->sent >= bench_lane_window)
        return 0;
    ++l->posted;
    return bench_post_send(l->qp, mr, id);
}

int main(void)
{
    int lanes;
    char word[8];
    if (scanf("%d", &lanes) != 1 || lanes <= 0)
        return 2;
    struct lane *lane = calloc((size_t)lanes, sizeof *lane);
    struct ibv_context *ctx = bench_open_device("bench_peer");
    if (!lane || !ctx)
        return 1;
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_mr *mr = pd ? bench_alloc_buffer(pd) : NULL;
    struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
    struct ibv_cq *cq = channel ? ibv_create_cq(ctx, 4 * lanes * bench_lane_window, NULL, channel, 0)
                                : NULL;
    if (!mr || !cq)
        return 1;
    for (int i = 0; i < lanes; ++i) {
        if (scanf("%u %ld", &lane[i].remote, &lane[i].total) != 2)
            return 2;
        lane[i].qp = bench_create_qp(pd, cq, cq, bench_lane_window);
        if (!lane[i].qp)
            return 1;
        printf("%u\n", lane[i].qp->qp_num);
    }
    fflush(stdout);
    for (int i = 0; i < lanes; ++i)
        if (bench_connect_qp(ctx, lane[i].qp, lane[i].remote) || bench_post_recv(lane[i].qp, mr, (unsigned)i))
            return 1;
    if (scanf("%7s", word) != 1 || strcmp(word, "go"))
        return 2;
    for (int i = 0; i < lanes; ++i)
        if (send_next(&lane[i], mr, (unsigned)i))
            return 1;

    int running = lanes, armed = 0;
    unsigned unacked = 0;
    while (running) {
        struct ibv_wc wc[poll_batch];
        int n = ibv_poll_cq(cq, poll_batch, wc);
        if (n < 0)
            return 1;
        for (int i = 0; i < n; ++i) {
            struct lane *l = &lane[wc[i].wr_id];
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "bench_peer: %s\n", ibv_wc_status_str(wc[i].status));
                return 1;
            }
            if (wc[i].opcode & IBV_WC_RECV) {
                if (++l->answers == l->total)
                    --running;
                else if (bench_post_recv(l->qp, mr, wc[i].wr_id))
                    return 1;
            } else {
                ++l->sent;
            }
            if (send_next(l, mr, wc[i].wr_id))
                return 1;
        }
        if (n)
            continue;
        if (!armed) { /* arm, then poll once more before sleeping */
            if (ibv_req_notify_cq(cq, 0))
                return 1;
            armed = 1;
            continue;
        }
        struct ibv_cq *ev_cq;
        void *ev_ctx;
        if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx))
            return 1;
        ++unacked;
        armed = 0;
    }
    ibv_ack_cq_events(cq, unacked);
    for (int i = 0; i < lanes; ++i)
        ibv_destroy_qp(lane[i].qp);
    ibv_destroy_cq(cq);
    ibv_destroy_comp_channel(channel);
    bench_free_buffer(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
