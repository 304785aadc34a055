// A work request of the stream's own on its queue pair: a receive kept posted for
// the peer's notifications (the immediate data of its RDMA writes), one of the
// stream's RDMA writes (data into the peer's ring, a credit record into its
// control block), or the hello's send and receive. The stream owns these
// operations and starts them again, one per posted work request; the queue
// pair's CQ reader completes them into the stream's state.
//
// Why not queue_pair's async_receive and async_write: those are a user's
// operations, each with a handler allocated, work counted and a completion posted.
// These are the stream's own, as the CQ reader's wait is the reader's own
// (member_wait): nothing is allocated per message, and when the CQ reader hands a
// completion over (delivery::may_run_here), the stream's state takes it in that
// call. Where nothing may run inside the call (the queue pair refused or ended it
// as it was started, or as it closed), it is posted to the stream's executor.
// While posted it holds the stream, which owns it; the context's shutdown destroys
// it unrun, letting the stream go.
//
// Core: `void completed(stream_work_request<Core>&, error_code,
// std::optional<std::uint32_t> immediate)` and `get_executor()`.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/qp/qp_operation.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/memory_region.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace rdma_asio::detail {

/// What a stream's work request is for: what its completion means.
enum class stream_request_role : std::uint8_t {
    notice,       ///< a receive for the peer's notification
    hello,        ///< the receive of the peer's hello (its length in wc.byte_len)
    write,        ///< a send or write that only reports a failure (the hello, a record, a
                  ///< wrap's first part)
    data,         ///< the notified write of copied data
    data_in_place ///< the notified write of data from the caller's memory
};

template <class Core>
class stream_work_request final : public qp_operation {
public:
    stream_work_request() noexcept : qp_operation(work_queue::receive) {}

    stream_request_role role = stream_request_role::notice;
    std::size_t index = 0;                    ///< a notice receive's number
    stream_work_request* next_free = nullptr; ///< the stream's list of idle writes

    /// Posts a receive on `qp`: into `into` (the peer's hello), or without data,
    /// for the immediate of the peer's next RDMA write.
    void start_receive(queue_pair_impl& qp, std::shared_ptr<Core> core,
                       registered_buffer into = {}) noexcept {
        prepare_receive(std::move(core), into);
        qp.start(*this);
    }

    /// A receive as start_receive() posts it, for the caller to start with others
    /// (queue_pair_impl::start of a list).
    void prepare_receive(std::shared_ptr<Core> core, registered_buffer into = {}) noexcept {
        prepare(work_queue::receive, std::move(core));
        set_local(into);
    }

    /// Posts a send of `local` (the hello).
    void start_send(queue_pair_impl& qp, std::shared_ptr<Core> core,
                    registered_buffer local) noexcept {
        prepare(work_queue::send, std::move(core));
        opcode = IBV_WR_SEND;
        set_local(local);
        qp.start(*this);
    }

    /// Posts an RDMA write of `local` to `remote`, with `immediate` when given;
    /// `signal_optional`: the stream needs no completion of it soon (it may go
    /// unsignaled, work_request_machine.hpp, and end with a later one).
    void start_write(queue_pair_impl& qp, std::shared_ptr<Core> core, registered_buffer local,
                     remote_buffer remote, std::optional<std::uint32_t> immediate,
                     bool signal_optional = false) noexcept {
        prepare(work_queue::send, std::move(core));
        this->signal_optional = signal_optional;
        opcode = immediate ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        this->immediate = immediate;
        set_local(local);
        remote_address = remote.address;
        rkey = remote.rkey;
        qp.start(*this);
    }

    /// Posts an RDMA write with `immediate` of `bytes`, the program's own, inline
    /// (qp_operation::copy_at_post) if it is posted in this call; false, nothing
    /// started and `core` let go, when the queue pair has no room now.
    bool start_inline_write(queue_pair_impl& qp, std::shared_ptr<Core> core,
                            asio::const_buffer bytes, remote_buffer remote,
                            std::uint32_t immediate) noexcept {
        prepare(work_queue::send, std::move(core));
        signal_optional = true; // done once posted
        copy_at_post = true;
        opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        this->immediate = immediate;
        // No lkey: read by the post only, never by the device.
        sges[0] = ibv_sge{reinterpret_cast<std::uintptr_t>(bytes.data()),
                          static_cast<std::uint32_t>(bytes.size()), 0};
        sge_count = 1;
        length = bytes.size();
        remote_address = remote.address;
        rkey = remote.rkey;
        if (qp.start_at_once(*this))
            return true;
        core_.reset();
        return false;
    }

    void complete(delivery how) override {
        std::shared_ptr<Core> core = std::move(core_); // *this may be started again from here
        const error_code ec = result;
        std::optional<std::uint32_t> imm;
        if (!ec && queue == work_queue::receive && (wc.wc_flags & IBV_WC_WITH_IMM) != 0)
            imm = ntohl(wc.imm_data);
        if (how == delivery::may_run_here) {
            core->completed(*this, ec, imm);
            return;
        }
        try {
            asio::post(core->get_executor(),
                       [core, self = this, ec, imm] { core->completed(*self, ec, imm); });
        } catch (...) {
            // No memory to queue it: as for any operation whose handler cannot be
            // queued, it is dropped (the stream then waits for its close).
        }
    }

    void destroy() noexcept override {
        // The context shuts down: the stream may go with this reference, and this
        // object with it; nothing of *this is used after.
        std::shared_ptr<Core> core = std::move(core_);
    }

private:
    void set_local(registered_buffer local) noexcept {
        sges[0] = ibv_sge{reinterpret_cast<std::uintptr_t>(local.data),
                          static_cast<std::uint32_t>(local.size), local.lkey};
        sge_count = local.size != 0 ? 1 : 0;
        length = local.size;
    }

    void prepare(work_queue q, std::shared_ptr<Core> core) noexcept {
        queue = q;
        st = state::idle;
        cancel_requested = false;
        result.clear();
        wc = {};
        signal_optional = false;
        copy_at_post = false;
        sge_count = 0;
        length = 0;
        immediate.reset();
        core_ = std::move(core);
    }

    std::shared_ptr<Core> core_; // while posted
};

} // namespace rdma_asio::detail
