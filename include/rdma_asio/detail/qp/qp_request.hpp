// One queue_pair operation as its initiation carries it: which queue, which verb,
// which memory, and what the verb needs besides. One value, so that a new verb is a
// new field, not a new parameter through every initiation.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

namespace rdma_asio {
struct receive_info;
} // namespace rdma_asio

namespace rdma_asio::detail {

struct qp_request {
    work_queue queue = work_queue::send;
    registered_buffer buffer{};
    ibv_wr_opcode opcode = IBV_WR_SEND; // send queue only
    remote_buffer remote{};             // RDMA read and write, atomics
    std::optional<std::uint32_t> immediate;
    receive_info* info = nullptr; // receives that asked for it
    std::uint64_t compare_add = 0;
    std::uint64_t swap = 0;

    /// Why the operation must end without being posted, or nothing. An atomic acts
    /// on 64 bits at an 8-byte aligned address on both sides (ibv_post_send(3));
    /// a device meets a misaligned one with an error completion that breaks the
    /// QP (IBV_WC_REM_INV_REQ_ERR), or worse, so it is refused here.
    error_code refusal() const noexcept {
        if (opcode != IBV_WR_ATOMIC_FETCH_AND_ADD && opcode != IBV_WR_ATOMIC_CMP_AND_SWP)
            return {};
        const auto local = reinterpret_cast<std::uintptr_t>(buffer.data);
        if (remote.address % 8 != 0 || local % 8 != 0 || buffer.size < 8)
            return errc::misaligned_atomic;
        return {};
    }

    /// Gives the operation what its post needs. An atomic's result takes the first
    /// 8 bytes of its buffer.
    void fill(qp_operation& op) const noexcept {
        op.opcode = opcode;
        op.sge = buffer.sge();
        if (op.is_atomic())
            op.sge.length = 8;
        op.remote_address = remote.address;
        op.rkey = remote.rkey;
        op.immediate = immediate;
        op.compare_add = compare_add;
        op.swap = swap;
    }
};

} // namespace rdma_asio::detail
