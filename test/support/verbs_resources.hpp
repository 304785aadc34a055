// Verbs objects for rxe tests: RAII handles and a pair of RC QPs on one device
// connected to each other (loopback through GID index 1, the IPv4-mapped GID).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rdma_asio::test {

struct pd_deleter {
    void operator()(ibv_pd* p) const noexcept { ibv_dealloc_pd(p); }
};
struct cq_deleter {
    void operator()(ibv_cq* p) const noexcept { ibv_destroy_cq(p); }
};
struct qp_deleter {
    void operator()(ibv_qp* p) const noexcept { ibv_destroy_qp(p); }
};
struct srq_deleter {
    void operator()(ibv_srq* p) const noexcept { ibv_destroy_srq(p); }
};
struct mr_deleter {
    void operator()(ibv_mr* p) const noexcept { ibv_dereg_mr(p); }
};
using pd_ptr = std::unique_ptr<ibv_pd, pd_deleter>;
using cq_ptr = std::unique_ptr<ibv_cq, cq_deleter>;
using qp_ptr = std::unique_ptr<ibv_qp, qp_deleter>;
using srq_ptr = std::unique_ptr<ibv_srq, srq_deleter>;
using mr_ptr = std::unique_ptr<ibv_mr, mr_deleter>;

pd_ptr make_pd(ibv_context* ctx);
cq_ptr make_cq(ibv_context* ctx, int entries, ibv_comp_channel* channel = nullptr);
srq_ptr make_srq(ibv_pd* pd, std::uint32_t max_wr);
/// An RC QP in RESET with room for max_send_wr sends and as many receives;
/// `srq` optional.
qp_ptr make_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq = nullptr,
                  std::uint32_t max_send_wr = 16);
// A UD QP of `max_wr` sends and receives, one entry each, in the RESET state.
qp_ptr make_ud_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_wr = 16);
/// Moves `qp` through INIT and RTR to RTS, connected to `remote_qpn` on port 1 of
/// the same device (rdma_asio::testing::connect_to_local_qp).
void connect_rc(ibv_context* ctx, ibv_qp* qp, std::uint32_t remote_qpn);
/// Connects two RC QPs of the same device to each other (connect_rc both ways).
void connect_rc_pair(ibv_context* ctx, ibv_qp* a, ibv_qp* b);

/// A buffer registered for local and remote access.
struct registered_buffer {
    registered_buffer(ibv_pd* pd, std::size_t size);
    std::vector<char> bytes;
    mr_ptr mr;
};

void post_recv(ibv_qp* qp, const registered_buffer& buf, std::uint64_t wr_id);
void post_srq_recv(ibv_srq* srq, const registered_buffer& buf, std::uint64_t wr_id);
void post_send(ibv_qp* qp, const registered_buffer& buf, std::uint64_t wr_id, bool signaled = true);
void post_rdma_write(ibv_qp* qp, const registered_buffer& local, const registered_buffer& remote,
                     std::uint64_t wr_id);

/// Runs a shell command; throws with its text when it exits non-zero.
void run_command(const std::string& command);

/// Polls ibv_query_port until port 1 has `state` (bounded); false on timeout.
bool wait_port_state(ibv_context* ctx, ibv_port_state state, std::chrono::milliseconds timeout);

} // namespace rdma_asio::test
