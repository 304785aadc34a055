/* The CQ-scaling benchmark's traffic crosses two processes, so that every message
 * reaches the measured program from outside and needs a wake-up: on rxe, a send
 * between two QPs of one process completes inside ibv_post_send, so the sender
 * finds its completions without ever sleeping.
 *
 * bench_peer, a program of its own, sends one message at a time on each lane; the
 * measured program answers each message on the lane's QP (an echo). The answer is
 * also the credit: the measured side answers only after it has reposted its
 * receive, and the peer sends the next message only when the answer is in (and it
 * posts the receive for the answer before it sends). Plain C, like loopback.h. */
#ifndef RDMA_ASIO_BENCH_REMOTE_H
#define RDMA_ASIO_BENCH_REMOTE_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Send-queue room of a lane's QPs: an answer may be posted before the send
 * completion of the previous one is polled. */
enum { bench_lane_window = 4 };

/* The measured side of one lane: `total` messages received and answered. */
struct bench_echo {
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    long total, received, sent; /* sent: answers' send completions polled */
};

/* Posts the receive for the first message. Returns 0 or -1 (message on stderr). */
int bench_echo_start(struct bench_echo *e, struct ibv_qp *qp, struct ibv_mr *mr, long total);
/* Takes n completions polled from the lane's CQ: a message reposts its receive,
 * then answers. Returns 0, or -1 with a message on stderr. */
int bench_echo_completed(struct bench_echo *e, const struct ibv_wc *wc, int n);
int bench_echo_done(const struct bench_echo *e);

struct bench_peer {
    int pid;
    FILE *to, *from; /* its stdin and stdout */
};

/* Starts bench_peer (the program next to the running one), gives it the lanes
 * (this side's QP numbers and each lane's count of messages) and reads its QP
 * numbers into peer_qpns. Returns 0 or -1 with a message on stderr. */
int bench_peer_start(struct bench_peer *p, int lanes, const uint32_t *qpns, const long *totals,
                     uint32_t *peer_qpns);
/* Lets the peer start sending: call once this side's QPs are connected and their
 * receives posted. */
int bench_peer_go(struct bench_peer *p);
/* Waits for the peer to finish; 0 if it succeeded. */
int bench_peer_wait(struct bench_peer *p);

#ifdef __cplusplus
}
#endif
#endif
