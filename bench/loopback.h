/* A pair of connected RC QPs on one device for the throughput benchmarks: QP a
 * sends to QP b; a's send CQ and b's receive CQ share one completion channel.
 * Plain C so that the plain C baseline and rdma_asio's benchmark set up the same
 * verbs objects the same way. */
#ifndef RDMA_ASIO_BENCH_LOOPBACK_H
#define RDMA_ASIO_BENCH_LOOPBACK_H

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { bench_message_size = 64 };

struct bench_loopback {
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    char *buf;
    struct ibv_cq *peer_cq; /* a's receives, b's sends: unused */
    struct ibv_qp *a, *b;
    int window;
};

/* Creates PD, MR and the two QPs (RTS, connected through GID index 1) using the
 * given CQs. Returns 0 or -1 with a message on stderr. */
int bench_loopback_init(struct bench_loopback *lb, struct ibv_context *ctx,
                        struct ibv_cq *send_cq, struct ibv_cq *recv_cq, int window);
void bench_loopback_destroy(struct bench_loopback *lb);
int bench_post_send(struct bench_loopback *lb, unsigned long long wr_id);
int bench_post_recv(struct bench_loopback *lb, unsigned long long wr_id);

#ifdef __cplusplus
}
#endif
#endif
