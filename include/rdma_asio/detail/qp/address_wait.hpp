// The start of a datagram send (async_send_to), whose destination may first need
// an address handle.
//
// Why it is shaped this way:
// - ibv_create_ah(3) may block for about a second on RoCE (the kernel resolves
//   the destination's Ethernet address and waits for the neighbour), and an
//   asynchronous operation must not block its initiator. So a send to a
//   destination without a handle waits for one made on the execution context's
//   blocking-call thread (blocking_call_thread.hpp), then starts as any other
//   send; one with a handle starts at once. The handle is kept for later sends.
// - Sends to one destination start in the order they were started: the first
//   has the handle made, the later ones wait with it (the queue pair holds the
//   waits, per destination), and until the last of them has started, a new send
//   to that destination waits behind them even though the handle is made (its
//   end is posted after theirs). While the thread that made the handle is still
//   posting their ends, a new send joins them, and that thread posts its end
//   too, last. A send to another destination does not wait.
// - While it waits, the operation counts as outstanding work of its executor
//   (run() does not return), and per-operation cancellation of any type, the
//   queue pair's cancel() and close() end it at once with operation_aborted; the
//   handle is still made and kept (until the queue pair is closed).
// - The wait ends on the handler's associated executor, where its cancellation
//   slot is used, so that the slot is cleared where it is emitted.
// - At the execution context's shutdown a wait not yet ended is destroyed with
//   its handler, not invoked, as Asio does with its own operations (the queue
//   pair drops the waits it holds).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/result_operation.hpp"
#include "rdma_asio/detail/qp/qp_handler_op.hpp"
#include "rdma_asio/detail/qp/qp_request.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

template <class Handler, class IoExecutor>
class address_wait : public std::enable_shared_from_this<address_wait<Handler, IoExecutor>> {
public:
    template <class H>
    address_wait(const std::shared_ptr<queue_pair_impl>& owner, const IoExecutor& io_ex,
                 H&& handler, const qp_request& r)
        : owner_(owner), io_ex_(io_ex), handler_(std::forward<H>(handler)),
          work_(asio::get_associated_executor(handler_, io_ex_)), request_(r),
          slot_(asio::get_associated_cancellation_slot(handler_)) {}

    /// Waits for the request's destination to have its handle (the queue pair
    /// holds the wait until then), then starts the send, or ends with the error
    /// of the making.
    static void start(const std::shared_ptr<queue_pair_impl>& owner, const IoExecutor& io_ex,
                      Handler handler, const qp_request& r) {
        auto wait = std::make_shared<address_wait>(owner, io_ex, std::move(handler), r);
        // Before the wait is handed over: its end may run on another thread at once.
        if (wait->slot_.is_connected())
            wait->slot_.template emplace<canceller>(wait);
        wait->waited_ = true; // before its end can run, on whatever thread
        if (!owner->wait_for_address_handle(r.destination, asio::any_io_executor(io_ex),
                                            [wait](error_code ec) { wait->end_later(ec); })) {
            wait->waited_ = false; // nothing counted, nothing will call it
            wait->end({});         // made meanwhile, or closed: the send decides now
        }
    }

private:
    struct canceller {
        std::weak_ptr<address_wait> wait;
        explicit canceller(const std::shared_ptr<address_wait>& w) : wait(w) {}
        void operator()(asio::cancellation_type) const {
            if (auto w = wait.lock())
                w->end_later(asio::error::operation_aborted);
        }
    };

    // From a blocking-call thread, the queue pair's close or the cancellation
    // slot: the end runs on the handler's executor.
    void end_later(error_code ec) {
        asio::post(work_.get_executor(), [self = this->shared_from_this(), ec] { self->end(ec); });
    }

    void end(error_code ec) {
        if (ended_.exchange(true))
            return;
        if (slot_.is_connected())
            slot_.clear(); // the send's own operation takes the slot next
        std::shared_ptr<queue_pair_impl> owner = owner_.lock();
        if (!owner)
            ec = asio::error::operation_aborted;
        // A send that waited for its handle was pending when the queue pair was
        // closed, also when the handle was made just before the close and this end
        // was posted but had not run: it ends as the close's other pending
        // operations do. (One that never waited was started on a closed queue
        // pair, which refuses it with bad_descriptor.)
        if (!ec && waited_ && owner->released())
            ec = asio::error::operation_aborted;
        if (ec)
            post_result(std::move(handler_), io_ex_, ec, std::size_t{0});
        else // a closed queue pair refuses it there
            start_qp_request<std::size_t>{}(owner, io_ex_, std::move(handler_), request_);
        if (owner && waited_) // posted (or ended): later sends need not wait for it
            owner->address_wait_done(request_.destination);
        work_.reset();
    }

    // Weak: the queue pair holds this wait until the handle is made, and the
    // send is not started once nothing else holds the queue pair.
    std::weak_ptr<queue_pair_impl> owner_;
    IoExecutor io_ex_;
    Handler handler_;
    asio::executor_work_guard<asio::associated_executor_t<Handler, IoExecutor>> work_;
    qp_request request_;
    asio::associated_cancellation_slot_t<Handler> slot_;
    std::atomic<bool> ended_{false};
    bool waited_ = false; // counted by the queue pair (wait_for_address_handle)
};

/// The Start (io_object::initiate) of a datagram send: start_qp_request, after an
/// address_wait when the destination has no address handle yet.
struct start_datagram_send {
    template <class IoExecutor, class Handler>
    void operator()(const std::shared_ptr<queue_pair_impl>& owner, const IoExecutor& io_ex,
                    Handler&& handler, const qp_request& r) const {
        if (r.refusal() || owner->has_address_handle(r.destination))
            return start_qp_request<std::size_t>{}(owner, io_ex, std::forward<Handler>(handler), r);
        address_wait<std::decay_t<Handler>, IoExecutor>::start(owner, io_ex,
                                                               std::forward<Handler>(handler), r);
    }
};

} // namespace rdma_asio::detail
