// A queue_pair operation with its handler: its start, its per-operation
// cancellation, and the result its handler gets (handler_operation delivers it).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/handler_operation.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/qp/qp_request.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

namespace rdma_asio {
struct receive_info;
} // namespace rdma_asio

namespace rdma_asio::detail {

/// Fills a receive_info from the completion of a receive (queue_pair.hpp).
void fill_receive_info(receive_info& info, const ibv_wc& wc) noexcept;

/// `Value`: what the handler gets besides the error: the bytes transferred
/// (std::size_t), or, for an atomic operation, the 64-bit value the remote memory
/// held before (std::uint64_t), read from the operation's result buffer; void
/// for nothing (async_wait_error).
template <class Handler, class IoExecutor, class Value = std::size_t>
class qp_handler_op final : public handler_operation<qp_handler_op<Handler, IoExecutor, Value>,
                                                     qp_operation, Handler, IoExecutor> {
    using base = handler_operation<qp_handler_op, qp_operation, Handler, IoExecutor>;

public:
    using typename base::ptr;

    template <class H>
    qp_handler_op(H&& handler, const IoExecutor& io_ex, work_queue q)
        : base(std::forward<H>(handler), io_ex, q), slot_(this->cancellation_slot()) {}

    /// Where receive_info goes on success (receives that asked for it).
    receive_info* info = nullptr;
    /// Where a UD receive's sender goes on success (receives that asked for it).
    datagram_endpoint* sender = nullptr;

    /// Starts `op` on `owner` (a queue_pair_impl, or a shared receive queue's),
    /// with per-operation cancellation when the handler has a connected slot.
    /// Takes ownership of `op`.
    template <class Owner>
    static void start(ptr op, const std::shared_ptr<Owner>& owner) {
        if (op->slot_.is_connected())
            op->slot_.template emplace<canceller<Owner>>(owner, op.get());
        owner->start(*op.release());
    }

    /// The canceller points at this operation: it goes with it (invoke has
    /// normally cleared it already, where the handler runs).
    ~qp_handler_op() {
        if (slot_.is_connected())
            slot_.clear();
    }

    /// The outcome, then the handler: (error_code, bytes transferred), or
    /// (error_code, the remote value before) for an atomic operation.
    static void invoke(ptr op) {
        if (op->slot_.is_connected()) {
            op->slot_.clear();
            op->slot_ = {}; // the destructor leaves the slot alone now
        }
        const error_code ec = op->result;
        if constexpr (std::is_void_v<Value>) {
            Handler handler(std::move(op->handler_));
            op.reset(); // the operation's memory is free before the handler runs
            std::move(handler)(ec);
            return;
        } else {
            Value value{};
            if (!ec) {
                if (op->is_atomic())
                    value = static_cast<Value>(atomic_result(*op));
                else
                    value = op->queue == work_queue::receive ? op->wc.byte_len : op->length;
                if (op->info != nullptr)
                    fill_receive_info(*op->info, op->wc);
                if (op->sender != nullptr)
                    *op->sender = op->peer;
            }
            Handler handler(std::move(op->handler_));
            op.reset(); // the operation's memory is free before the handler runs
            std::move(handler)(ec, std::move(value));
        }
    }

private:
    // The value the device wrote into the result buffer: the remote memory's
    // before the operation (as the device returns it: host byte order on rxe).
    static std::uint64_t atomic_result(const qp_operation& op) noexcept {
        std::uint64_t v = 0;
        std::memcpy(&v, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(op.sges[0].addr)),
                    sizeof v);
        return v;
    }

    // Per-operation cancellation; it runs where the handler's completion runs, so
    // it never races with the slot's clear() in invoke.
    template <class Owner>
    struct canceller {
        std::weak_ptr<Owner> owner;
        qp_operation* op;
        canceller(const std::shared_ptr<Owner>& o, qp_operation* p) : owner(o), op(p) {}
        void operator()(asio::cancellation_type type) const {
            if (auto state = owner.lock())
                state->cancel_operation(*op, type);
        }
    };

    asio::associated_cancellation_slot_t<Handler> slot_;
};

/// The handler's signature for a Value (see qp_handler_op).
template <class Value>
struct qp_signature {
    using type = void(error_code, Value);
};
template <>
struct qp_signature<void> {
    using type = void(error_code);
};

/// The start of every queue_pair and shared_receive_queue operation (a Start of
/// io_object::initiate): a request refused before posting completes, posted, with
/// its refusal; any other becomes a qp_handler_op on `owner` (a queue_pair_impl or
/// a shared_receive_queue_impl).
template <class Value>
struct start_qp_request {
    template <class Owner, class IoExecutor, class Handler>
    void operator()(const std::shared_ptr<Owner>& owner, const IoExecutor& io_ex, Handler&& handler,
                    const qp_request& r) const {
        if (error_code ec = r.refusal())
            return closed_initiation<typename qp_signature<Value>::type>::fail(
                std::forward<Handler>(handler), io_ex, r.what, ec);
        using op_type = qp_handler_op<std::decay_t<Handler>, IoExecutor, Value>;
        auto op = op_type::create(std::forward<Handler>(handler), io_ex, r.queue);
        r.fill(*op);
        op->info = r.info;
        op->sender = r.sender;
        op_type::start(std::move(op), owner);
    }
};

} // namespace rdma_asio::detail
