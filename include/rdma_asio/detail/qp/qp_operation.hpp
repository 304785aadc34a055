// An operation of a queue pair as the work-request path sees it, whoever serves
// it: a queue pair (queue_pair_impl), a shared receive queue, the demultiplexer
// that completes it. Its own header, so that they need it and not each other.
#pragma once

#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/core/operation.hpp"
#include "rdma_asio/detail/qp/work_request_machine.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdma_asio::detail {

/// An operation of a queue_pair: the machine's view of it, the work request it
/// posts, and how it ends (an operation; qp_handler_op, templated on the handler,
/// implements that). The queue pair completes it with delivery::post; only a
/// demultiplexer's poll handler, holding no lock, with delivery::may_run_here.
struct qp_operation : work_request_op, operation {
    explicit qp_operation(work_queue q) noexcept : work_request_op(q) {}

    /// The entries of a scatter/gather list an operation carries itself (one
    /// work request, several registered buffers).
    static constexpr std::size_t max_sges = 4;

    ibv_wr_opcode opcode = IBV_WR_SEND; // send queue only
    // The first sge_count entries are the work request's list (none: no data);
    // the rest stay unwritten, which saves stores on every operation.
    std::array<ibv_sge, max_sges> sges;
    std::uint32_t sge_count = 0;
    std::uint64_t length = 0;         // the entries' total
    std::uint64_t remote_address = 0; // RDMA read and write, atomics
    std::uint32_t rkey = 0;
    std::optional<std::uint32_t> immediate; // host byte order
    std::uint64_t compare_add = 0;          // atomics: the addend, or the value compared
    std::uint64_t swap = 0;                 // compare-and-swap: the value stored on a match
    // UD: a send's destination; a receive's sender, once it has completed.
    datagram_endpoint peer;
    std::uint32_t grh_slot = 0; // UD receives: where the device put the GRH
    // A send whose owner needs no completion of its own (work_request_machine:
    // it may go unsignaled as the last of its batch, and end later).
    bool signal_optional = false;
    // A send of bytes that are the program's own, not in any region (a stream's
    // small write, straight from the caller's memory): posted inline, the post
    // copying them into the work request (inline_send_check::allows_copy), or
    // refused; the device never reads them, and no lkey vouches for them.
    bool copy_at_post = false;

    bool is_atomic() const noexcept {
        return opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    }

protected:
    ~qp_operation() = default;
};

} // namespace rdma_asio::detail
