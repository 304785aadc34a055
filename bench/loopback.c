#include "loopback.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bench_connect_qp(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t remote)
{
    union ibv_gid gid;
    struct ibv_qp_attr attr;

    if (ibv_query_gid(ctx, 1, 1, &gid))
        return -1;
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = remote;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 1;
    attr.ah_attr.grh.hop_limit = 1;
    attr.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

struct ibv_qp *bench_create_qp(struct ibv_pd *pd, struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
                               int window)
{
    struct ibv_qp_init_attr init;

    memset(&init, 0, sizeof init);
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = (uint32_t)window;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    init.send_cq = send_cq;
    init.recv_cq = recv_cq;
    return ibv_create_qp(pd, &init);
}

struct ibv_mr *bench_alloc_buffer(struct ibv_pd *pd)
{
    void *buf = calloc(1, bench_message_size);
    struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, bench_message_size, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!mr)
        free(buf);
    return mr;
}

void bench_free_buffer(struct ibv_mr *mr)
{
    void *buf = mr->addr;
    ibv_dereg_mr(mr);
    free(buf);
}

int bench_loopback_init(struct bench_loopback *lb, struct ibv_context *ctx,
                        struct ibv_cq *send_cq, struct ibv_cq *recv_cq, int window)
{
    memset(lb, 0, sizeof *lb);
    lb->pd = ibv_alloc_pd(ctx);
    if (!lb->pd)
        goto fail;
    lb->mr = bench_alloc_buffer(lb->pd);
    lb->peer_cq = ibv_create_cq(ctx, 4 * window, NULL, NULL, 0);
    if (!lb->mr || !lb->peer_cq)
        goto fail;
    lb->a = bench_create_qp(lb->pd, send_cq, lb->peer_cq, window);
    lb->b = bench_create_qp(lb->pd, lb->peer_cq, recv_cq, window);
    if (!lb->a || !lb->b || bench_connect_qp(ctx, lb->a, lb->b->qp_num) ||
        bench_connect_qp(ctx, lb->b, lb->a->qp_num))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "bench: setting up the loopback QPs failed\n");
    return -1;
}

void bench_loopback_destroy(struct bench_loopback *lb)
{
    if (lb->b)
        ibv_destroy_qp(lb->b);
    if (lb->a)
        ibv_destroy_qp(lb->a);
    if (lb->peer_cq)
        ibv_destroy_cq(lb->peer_cq);
    if (lb->mr)
        bench_free_buffer(lb->mr);
    if (lb->pd)
        ibv_dealloc_pd(lb->pd);
}

/* Every message uses the one buffer: the benchmarks never look at the bytes. */
int bench_post_send(struct ibv_qp *qp, struct ibv_mr *mr, unsigned long long wr_id)
{
    struct ibv_sge sge = {(uintptr_t)mr->addr, bench_message_size, mr->lkey};
    struct ibv_send_wr wr, *bad;

    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    return ibv_post_send(qp, &wr, &bad);
}

int bench_post_recv(struct ibv_qp *qp, struct ibv_mr *mr, unsigned long long wr_id)
{
    struct ibv_sge sge = {(uintptr_t)mr->addr, bench_message_size, mr->lkey};
    struct ibv_recv_wr wr, *bad;

    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp, &wr, &bad);
}

int bench_flow_start(struct bench_flow *flow, struct bench_loopback *lb, long total,
                     int in_flight)
{
    memset(flow, 0, sizeof *flow);
    flow->lb = lb;
    flow->total = total;
    flow->in_flight = in_flight;
    return bench_flow_completed(flow, NULL, 0);
}

int bench_flow_completed(struct bench_flow *flow, const struct ibv_wc *wc, int n)
{
    for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            fprintf(stderr, "bench: work completion %llu failed: %s\n",
                    (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
            return -1;
        }
        if (wc[i].opcode & IBV_WC_RECV)
            ++flow->received;
        else
            ++flow->sent;
    }
    /* Keep in_flight receives posted while messages are still to come: each one
     * is a credit for a send. */
    while (flow->recv_posted < flow->total && flow->recv_posted - flow->received < flow->in_flight) {
        if (bench_post_recv(flow->lb->b, flow->lb->mr, (unsigned long long)flow->recv_posted))
            goto post_failed;
        ++flow->recv_posted;
    }
    while (flow->posted < flow->total && flow->posted < flow->recv_posted &&
           flow->posted - flow->sent < flow->in_flight) {
        if (bench_post_send(flow->lb->a, flow->lb->mr, (unsigned long long)flow->posted))
            goto post_failed;
        ++flow->posted;
    }
    return 0;
post_failed:
    fprintf(stderr, "bench: posting a work request failed\n");
    return -1;
}

int bench_flow_done(const struct bench_flow *flow)
{
    return flow->sent == flow->total && flow->received == flow->total;
}

static int positive(const char *text, long *value)
{
    char *end;
    *value = strtol(text, &end, 10);
    return *text && !*end && *value > 0;
}

int bench_parse_options(int argc, char *argv[], const char *accepted, const char *usage,
                        struct bench_options *o)
{
    int c;
    long v;

    while ((c = getopt(argc, argv, accepted)) != -1) {
        if (c == 'a') {
            o->all_cqs = 1;
            continue;
        }
        if (c == 'h') {
            o->handlers = 1;
            continue;
        }
        if (c == 'x') {
            o->typed = 1;
            continue;
        }
        if (c == 'o') {
            o->one_at_a_time = 1;
            continue;
        }
        if ((c != 'i' && c != 'c' && c != 's') || !positive(optarg, &v) || v > 65536)
            goto bad;
        if (c == 'i')
            o->in_flight = (int)v;
        else if (c == 's')
            o->spin_usec = (int)v;
        else
            o->cqs = (int)v;
    }
    if (optind < argc && !positive(argv[optind++], &o->messages))
        goto bad;
    if (optind == argc)
        return 0;
bad:
    fprintf(stderr, "usage: %s\n", usage);
    return -1;
}

const char *bench_device_name(void)
{
    const char *name = getenv("RDMA_ASIO_TEST_DEVICE");
    return name && *name ? name : "rxe0";
}

struct ibv_context *bench_open_device(const char *program)
{
    const char *name = bench_device_name();
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = NULL;

    for (int i = 0; list && list[i] && !ctx; ++i)
        if (!strcmp(ibv_get_device_name(list[i]), name))
            ctx = ibv_open_device(list[i]);
    if (list)
        ibv_free_device_list(list);
    if (!ctx)
        fprintf(stderr, "%s: cannot open %s\n", program, name);
    return ctx;
}
