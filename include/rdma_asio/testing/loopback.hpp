// Two RC QPs of one device connected to each other, for tests that send, receive,
// write and read without a second machine (on rxe, or on any RDMA NIC).
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <infiniband/verbs.h>

#include <cstdint>

namespace rdma_asio::testing {

struct loopback_options {
    std::uint8_t port = 1;
    /// The GID the QPs address each other by on a RoCE port; -1 picks the first
    /// RoCE v2 GID of an IPv4 address (on rxe, the address of its netdev), else the
    /// first RoCE v2 one, else index 0. Unused on an InfiniBand port (LIDs).
    int gid_index = -1;
    /// Each QP's send and receive queue depth.
    std::uint32_t depth = 64;
    /// How often a send is retried while the peer has no receive posted
    /// (ibv_qp_attr::rnr_retry, 0 to 7). 7, the default, means for ever: a
    /// receive posted late is waited for, and a send whose peer never posts one
    /// never completes. 0 to 6 make such a send fail with
    /// wc_errc::rnr_retry_exceeded after that many retries, each about 0.64 ms
    /// apart (the receiver's RNR timer).
    std::uint8_t rnr_retry = 7;
};

/// The GID index connect_loopback uses on `port` of `ctx` with `gid_index` -1.
/// Throws system_error naming ibv_query_gid_ex when the port has no GID.
int loopback_gid_index(ibv_context* ctx, std::uint8_t port);

/// Moves an RC QP of `ctx`, in the RESET state, through INIT, RTR and RTS,
/// connected to the QP numbered `remote_qp_num` on the same port of the same
/// device, with every access right (local write, remote read, write and atomics).
/// Throws system_error naming the failed call (ibv_query_port,
/// ibv_query_gid, ibv_modify_qp to INIT/RTR/RTS).
void connect_to_local_qp(ibv_context* ctx, ibv_qp* qp, std::uint32_t remote_qp_num,
                         const loopback_options& options = {});

/// connect_to_local_qp both ways: two RC QPs of `ctx`, in the RESET state, each
/// connected to the other.
void connect_loopback(ibv_context* ctx, ibv_qp* a, ibv_qp* b, const loopback_options& options = {});

/// A protection domain, two CQs on `channel` and two queue_pairs, `a` on the first
/// CQ and `b` on the second, connected to each other: ready for async_send,
/// async_receive, async_write and async_read. Destroyed in the right order.
template <class Executor = asio::any_io_executor>
class basic_loopback_pair {
public:
    basic_loopback_pair(const context& ctx, const basic_completion_channel<Executor>& channel,
                        const loopback_options& options = {})
        : pd_(ctx), cq_a_(channel, 2 * static_cast<int>(options.depth)),
          cq_b_(channel, 2 * static_cast<int>(options.depth)),
          a_(pd_, cq_a_, cq_a_, qp_options{options.depth, options.depth}),
          b_(pd_, cq_b_, cq_b_, qp_options{options.depth, options.depth}) {
        connect_loopback(ctx.native_handle(), a_.native_handle(), b_.native_handle(), options);
    }

    protection_domain& pd() noexcept { return pd_; }
    basic_completion_queue<Executor>& cq_a() noexcept { return cq_a_; }
    basic_completion_queue<Executor>& cq_b() noexcept { return cq_b_; }
    basic_queue_pair<Executor>& a() noexcept { return a_; }
    basic_queue_pair<Executor>& b() noexcept { return b_; }

private:
    protection_domain pd_;
    basic_completion_queue<Executor> cq_a_;
    basic_completion_queue<Executor> cq_b_;
    basic_queue_pair<Executor> a_;
    basic_queue_pair<Executor> b_;
};

using loopback_pair = basic_loopback_pair<>;

} // namespace rdma_asio::testing
