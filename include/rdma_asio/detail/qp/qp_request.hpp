// One queue_pair operation as its initiation carries it: which queue, which verb,
// which memory, and what the verb needs besides. One value, so that a new verb is a
// new field, not a new parameter through every initiation.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>

namespace rdma_asio {
struct receive_info;
} // namespace rdma_asio

namespace rdma_asio::detail {

struct qp_request {
    work_queue queue = work_queue::send;
    ibv_wr_opcode opcode = IBV_WR_SEND; // send queue only
    // The scatter/gather list, copied: a deferred operation may start after the
    // caller's list is gone.
    std::array<ibv_sge, qp_operation::max_sges> sges;
    std::uint32_t sge_count = 0;
    std::uint64_t length = 0;
    bool too_many_buffers = false;
    remote_buffer remote{}; // RDMA read and write, atomics
    std::optional<std::uint32_t> immediate;
    receive_info* info = nullptr;               // receives that asked for it
    const char* what = "rdma_asio::queue_pair"; // the object, for a refusal's error
    std::uint64_t compare_add = 0;
    std::uint64_t swap = 0;
    datagram_endpoint destination{};     // UD sends
    datagram_endpoint* sender = nullptr; // UD receives that asked for it

    /// An operation of the send queue on `buffers` (see set_buffers).
    template <class Buffers>
    static qp_request send(const Buffers& buffers, ibv_wr_opcode opcode,
                           remote_buffer remote = {}) noexcept {
        qp_request r;
        r.queue = work_queue::send;
        r.set_buffers(buffers);
        r.opcode = opcode;
        r.remote = remote;
        return r;
    }
    /// A receive into `buffers`, filling `info` on success unless it is null.
    template <class Buffers>
    static qp_request receive(const Buffers& buffers, receive_info* info = nullptr) noexcept {
        qp_request r;
        r.queue = work_queue::receive;
        r.set_buffers(buffers);
        r.info = info;
        return r;
    }

    /// A wait for the queue pair to leave service (async_wait_error): no work
    /// request, no buffer.
    static qp_request error_watch() noexcept {
        qp_request r;
        r.queue = work_queue::error_watch;
        return r;
    }

    /// One buffer (an empty one makes a work request without data), or a
    /// contiguous range of them, in order, empty ones left out.
    template <class Buffers>
    void set_buffers(const Buffers& buffers) noexcept {
        sge_count = 0;
        length = 0;
        too_many_buffers = false;
        if constexpr (std::is_same_v<Buffers, registered_buffer>) {
            add(buffers);
        } else {
            for (const registered_buffer& b : std::span<const registered_buffer>(buffers))
                add(b);
        }
    }

    /// Why the operation must end without being posted, or nothing:
    /// - more non-empty buffers than an operation carries: E2BIG;
    /// - an atomic whose remote address or result buffer is not 8-byte aligned, or
    ///   whose result buffer is shorter than 8 bytes: errc::misaligned_atomic. An
    ///   atomic acts on 64 bits at an aligned address on both sides
    ///   (ibv_post_send(3)); a device meets a misaligned one with an error
    ///   completion that breaks the QP (IBV_WC_REM_INV_REQ_ERR), or worse.
    error_code refusal() const noexcept {
        if (too_many_buffers)
            return errno_code(E2BIG);
        if (opcode != IBV_WR_ATOMIC_FETCH_AND_ADD && opcode != IBV_WR_ATOMIC_CMP_AND_SWP)
            return {};
        if (remote.address % 8 != 0 || sge_count != 1 || sges[0].addr % 8 != 0 ||
            sges[0].length < 8)
            return errc::misaligned_atomic;
        return {};
    }

    /// Gives the operation what its post needs. An atomic's result takes the first
    /// 8 bytes of its buffer.
    void fill(qp_operation& op) const noexcept {
        op.opcode = opcode;
        for (std::uint32_t i = 0; i < sge_count; ++i)
            op.sges[i] = sges[i];
        op.sge_count = sge_count;
        op.length = length;
        if (op.is_atomic()) {
            op.sges[0].length = 8;
            op.length = 8;
        }
        op.remote_address = remote.address;
        op.rkey = remote.rkey;
        op.immediate = immediate;
        op.compare_add = compare_add;
        op.swap = swap;
        op.peer = destination;
    }

private:
    void add(registered_buffer b) noexcept {
        if (b.size == 0)
            return;
        if (sge_count == sges.size()) {
            too_many_buffers = true;
            return;
        }
        sges[sge_count++] = b.sge();
        length += b.size;
    }
};

} // namespace rdma_asio::detail
