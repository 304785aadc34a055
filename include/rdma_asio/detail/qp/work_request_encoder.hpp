// How an operation of a queue pair becomes the work request the verbs take
// (ibv_post_send(3), ibv_post_recv(3)), with no I/O: the queue pair decides what
// to post (work_request_machine), this says how each field is written, and the
// queue pair posts. Unit-tested without a device (work_request_encoder_test.cpp).
//
// Why the fields are what they are:
// - A signaled send ends by its own completion; an unsignaled one (a send with
//   another right behind it) by the next completion of its queue, which the
//   machine arranges. Receives are always signaled (ibv_post_recv(3) has no flag).
// - The immediate is given in host byte order and travels in network order: the
//   verbs take imm_data as the wire's big-endian value.
// - ibv_send_wr's `wr` is a union: an RDMA operation's remote address and key, an
//   atomic's operands, or a UD send's address handle, QP number and Q_Key, never
//   two of them.
// - Inline is the queue pair's decision (it checks the buffer's region first, see
//   inline_send_check.hpp); here it is only a flag.
// - The fence that follows unsignaled sends when the send meant to end them
//   could not be posted is a zero-length RDMA write: it reads and writes no
//   memory, and the responder checks no key for it (InfiniBand C9-88).
#pragma once

#include "rdma_asio/detail/qp/qp_operation.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>

namespace rdma_asio::detail {

/// How a send is posted, as the queue pair decided it.
struct send_posting {
    bool signaled = true;
    bool inline_data = false;
    /// UD: the destination's address handle (op.peer names its QP and Q_Key);
    /// null on an RC queue pair.
    ibv_ah* address_handle = nullptr;
};

/// The send queue's work request for `op`: its opcode, its scatter/gather list
/// (op.sges, which must stay where it is until the post), its flags, immediate
/// and remote fields.
ibv_send_wr send_request(qp_operation& op, const send_posting& how) noexcept;

/// The receive queue's work request for `op`, whose scatter/gather list is `list`
/// (op.sges, or a UD receive's list with the GRH's slot in front).
ibv_recv_wr receive_request(const qp_operation& op, std::span<ibv_sge> list) noexcept;

/// The fence posted with `wr_id` after unsignaled sends: a signaled zero-length
/// RDMA write.
ibv_send_wr fence_request(std::uint64_t wr_id) noexcept;

} // namespace rdma_asio::detail
