/* What the benchmarks share, in plain C so that the plain C baselines depend on no
 * C++ code and rdma_asio's benchmarks set up the same verbs objects the same way and
 * do the same work per message:
 *
 * - a loopback: a pair of connected RC QPs on one device; QP a sends to QP b, a's
 *   send CQ and b's receive CQ are the caller's (they may be one CQ);
 * - a flow: the traffic over one loopback under the flow control a real program
 *   must obey (receive credits, a bounded send queue);
 * - the command line and the device. */
#ifndef RDMA_ASIO_BENCH_LOOPBACK_H
#define RDMA_ASIO_BENCH_LOOPBACK_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { bench_message_size = 64 };

/* An RC QP on `pd` (send_cq and recv_cq may be one CQ) with room for `window`
 * work requests each way; NULL on failure. */
struct ibv_qp *bench_create_qp(struct ibv_pd *pd, struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
                               int window);
/* INIT, RTR, RTS towards QP number `remote` on the same device (GID index 1). */
int bench_connect_qp(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t remote);
/* A message-sized buffer registered on `pd` (mr->addr), and its release. */
struct ibv_mr *bench_alloc_buffer(struct ibv_pd *pd);
void bench_free_buffer(struct ibv_mr *mr);
/* A signaled send of one message, and a receive for one. */
int bench_post_send(struct ibv_qp *qp, struct ibv_mr *mr, unsigned long long wr_id);
int bench_post_recv(struct ibv_qp *qp, struct ibv_mr *mr, unsigned long long wr_id);

struct bench_loopback {
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_cq *peer_cq; /* a's receives, b's sends: unused */
    struct ibv_qp *a, *b;
};

/* Creates PD, MR and the two QPs (RTS, connected through GID index 1) using the
 * given CQs, with room for `window` sends and receives. Returns 0 or -1 with a
 * message on stderr. */
int bench_loopback_init(struct bench_loopback *lb, struct ibv_context *ctx,
                        struct ibv_cq *send_cq, struct ibv_cq *recv_cq, int window);
void bench_loopback_destroy(struct bench_loopback *lb);

/* `total` messages from a to b, at most `in_flight` at a time. A message is one
 * signaled send and the receive it lands in: a send is posted only when a receive
 * is known to be posted for it (a credit: receives posted minus sends posted) and
 * the send queue has room (sends posted minus send completions polled), so the
 * receiver never answers with an RNR NAK and the send queue never overflows. A
 * receive completion reposts its receive, which gives the next credit. */
struct bench_flow {
    struct bench_loopback *lb;
    long total, in_flight;
    long posted;      /* sends posted */
    long sent;        /* send completions polled */
    long recv_posted; /* receives posted */
    long received;    /* receive completions polled */
};

/* Posts `in_flight` receives (no more than `total`), then the sends they cover.
 * Returns 0 or -1 with a message on stderr. */
int bench_flow_start(struct bench_flow *flow, struct bench_loopback *lb, long total,
                     int in_flight);
/* Takes n completions polled from the flow's CQs (sends and receives in any order):
 * reposts receives, then posts the sends that credits and send queue allow.
 * Returns 0, or -1 with a message on stderr for a failed completion or post. */
int bench_flow_completed(struct bench_flow *flow, const struct ibv_wc *wc, int n);
/* Every send and every receive of the flow has completed. */
int bench_flow_done(const struct bench_flow *flow);

struct bench_options {
    long messages;  /* operand MESSAGES */
    int in_flight;  /* -i N */
    int cqs;        /* -c N */
    int all_cqs;    /* -a */
    int spin_usec;  /* -s USEC: the rdma_asio programs' spin budget (0: none) */
    int handlers;   /* -h: qp_throughput's lanes as completion handlers, not coroutines */
    int typed;      /* -x: cq_throughput's channel and CQs on io_context::executor_type */
    int one_at_a_time; /* -o: qp_throughput's coroutines await one operation at a time */
};

/* getopt over the options named in `accepted` ("i:" "c:" "a" "s:" "h" "x" "o") and one optional
 * MESSAGES operand; `o` holds the defaults. On bad input prints `usage` and
 * returns -1. */
int bench_parse_options(int argc, char *argv[], const char *accepted, const char *usage,
                        struct bench_options *o);

/* $RDMA_ASIO_TEST_DEVICE, or rxe0. */
const char *bench_device_name(void);
/* Opens bench_device_name(); NULL with a message naming `program` on failure. */
struct ibv_context *bench_open_device(const char *program);

#ifdef __cplusplus
}
#endif
#endif
