#include "loopback.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int to_rts(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t remote)
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

int bench_loopback_init(struct bench_loopback *lb, struct ibv_context *ctx,
                        struct ibv_cq *send_cq, struct ibv_cq *recv_cq, int window)
{
    struct ibv_qp_init_attr init;

    memset(lb, 0, sizeof *lb);
    lb->window = window;
    lb->buf = calloc((size_t)window * 2, bench_message_size);
    lb->pd = ibv_alloc_pd(ctx);
    if (!lb->buf || !lb->pd)
        goto fail;
    lb->mr = ibv_reg_mr(lb->pd, lb->buf, (size_t)window * 2 * bench_message_size,
                        IBV_ACCESS_LOCAL_WRITE);
    lb->peer_cq = ibv_create_cq(ctx, 4 * window, NULL, NULL, 0);
    if (!lb->mr || !lb->peer_cq)
        goto fail;
    memset(&init, 0, sizeof init);
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = (uint32_t)window;
    init.cap.max_recv_wr = (uint32_t)window * 2;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    init.send_cq = send_cq;
    init.recv_cq = lb->peer_cq;
    lb->a = ibv_create_qp(lb->pd, &init);
    init.send_cq = lb->peer_cq;
    init.recv_cq = recv_cq;
    lb->b = ibv_create_qp(lb->pd, &init);
    if (!lb->a || !lb->b || to_rts(ctx, lb->a, lb->b->qp_num) || to_rts(ctx, lb->b, lb->a->qp_num))
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
        ibv_dereg_mr(lb->mr);
    if (lb->pd)
        ibv_dealloc_pd(lb->pd);
    free(lb->buf);
}

int bench_post_send(struct bench_loopback *lb, unsigned long long wr_id)
{
    struct ibv_sge sge = {(uintptr_t)lb->buf, bench_message_size, lb->mr->lkey};
    struct ibv_send_wr wr, *bad;

    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    return ibv_post_send(lb->a, &wr, &bad);
}

int bench_post_recv(struct bench_loopback *lb, unsigned long long wr_id)
{
    struct ibv_sge sge = {(uintptr_t)(lb->buf + (size_t)lb->window * bench_message_size),
                          bench_message_size, lb->mr->lkey};
    struct ibv_recv_wr wr, *bad;

    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(lb->b, &wr, &bad);
}
