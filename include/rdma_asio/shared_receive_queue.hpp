// A shared receive queue (ibv_create_srq(3)) whose receives are Asio operations:
// one pool of receive buffers for many queue pairs, so that the memory posted for
// receives follows the traffic, not the number of connections.
#pragma once

#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/detail/async_event/device_event_wait.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/qp_handler_op.hpp"
#include "rdma_asio/detail/qp/qp_request.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/detail/qp/srq_limit_wait_op.hpp"
#include "rdma_asio/event_match.hpp"
#include "rdma_asio/event_type.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

namespace rdma_asio {

/// How a shared_receive_queue creates its SRQ (ibv_create_srq(3)).
struct srq_options {
    /// Receives posted at once: async_receive beyond it waits, in the order
    /// started, for a posted one to complete.
    std::uint32_t depth = 256;
    /// Scatter/gather entries per receive (at most 4, what an operation carries).
    std::uint32_t max_sge = 4;
};

/// A shared receive queue: the receive queue of every queue pair made on it
/// (queue_pair's constructor and open() that take one). Each message any of them
/// receives takes the next receive posted here, and its async_receive completes
/// with receive_info::qp_num naming the queue pair that took it.
///
/// Receives complete through the receive CQs of its queue pairs (which must be
/// rdma_asio completion_queues used by queue pairs, see queue_pair); a receive
/// posted before any queue pair is made on it waits for the first.
///
/// Handlers, memory, buffers and shutdown: as queue_pair's.
///
/// Errors of async_receive: a failed completion's status in wc_errc's category
/// (wc_errc::flushed when the queue pair that took it went to the error state;
/// the shared receive queue itself stays usable); operation_aborted after
/// cancellation, or when the SRQ was destroyed with it posted (close());
/// bad_descriptor on a closed object; E2BIG for more than 4 buffers; the errno of
/// ibv_post_srq_recv; errc::device_removed once the device is gone.
///
/// Per-operation cancellation: a receive still waiting for room supports
/// terminal, partial and total cancellation. A posted receive cannot be taken
/// back and a shared receive queue cannot be flushed, so a posted receive ignores
/// cancellation: it ends by a message, by its queue pair's failure, or by the
/// close of the SRQ. So `receive || timer` waits, once the receive is posted, for
/// one of these even when the timer wins.
///
/// close(): later receives end with bad_descriptor, waiting ones with
/// operation_aborted. The SRQ is destroyed (ibv_destroy_srq), and its posted
/// receives end with operation_aborted, at once when no queue pair is on it,
/// else when the last of its queue pairs is destroyed (ibv_destroy_srq(3)
/// refuses while one is). A queue pair on it keeps it open until then.
///
/// Closing a queue pair on it: queue_pair::async_close waits for the device's
/// IBV_EVENT_QP_LAST_WQE_REACHED before it destroys the queue pair, so that every
/// receive it took ends by its own completion (rxe raises the event from Linux
/// 6.5 on, not on Debian 12's 6.1: bound the wait). close() destroys it at once: a
/// receive whose completion is still unread in the CQ still ends with its message
/// where the provider leaves a destroyed queue pair's completions in the CQ (rxe
/// does); one taken for a message still arriving ends when the SRQ is destroyed.
template <class Executor = asio::any_io_executor>
class basic_shared_receive_queue : public detail::io_object<basic_shared_receive_queue, Executor,
                                                            detail::shared_receive_queue_impl> {
    using base =
        detail::io_object<basic_shared_receive_queue, Executor, detail::shared_receive_queue_impl>;
    using impl_type = detail::shared_receive_queue_impl;

public:
    using typename base::executor_type;
    /// The ibv_srq.
    using typename base::native_handle_type;

    /// A shared receive queue that is not open.
    explicit basic_shared_receive_queue(const detail::executor_or_context<Executor>& ex)
        : base(ex) {}

    /// Creates an SRQ on `pd`. Throws system_error naming ibv_create_srq.
    basic_shared_receive_queue(const detail::executor_or_context<Executor>& ex,
                               const protection_domain& pd, const srq_options& options = {})
        : base(ex) {
        error_code ec;
        open(pd, options, ec);
        detail::throw_if_error(ec, "rdma_asio::shared_receive_queue: ibv_create_srq");
    }

    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // calls close().
    using base::base;
    using base::operator=;

    /// Creates the SRQ. Errors: already_open; bad_descriptor for a closed
    /// protection domain; the errno of ibv_create_srq (EINVAL for a depth or
    /// max_sge beyond the device's).
    void open(const protection_domain& pd, const srq_options& options, error_code& ec) {
        this->open_with(ec, [&](const Executor& ex, error_code& e) {
            return impl_type::create(context_of(ex), pd.share(), options.depth, options.max_sge, e);
        });
    }

    /// As open(pd, options, ec), throwing system_error that names ibv_create_srq.
    void open(const protection_domain& pd, const srq_options& options = {}) {
        this->open_or_throw("rdma_asio::shared_receive_queue::open: ibv_create_srq", pd, options);
    }

    /// Receives the next message any of its queue pairs gets into `buffer` (one
    /// registered_buffer or a contiguous range of them, as queue_pair's).
    /// Signature: void(error_code, std::size_t bytes received).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_receive(std::forward<CompletionToken>(token), buffer, nullptr);
    }
    /// The same, filling `info` on success: receive_info::qp_num names the queue
    /// pair the message arrived on (with the immediate data, as queue_pair's).
    /// `info` must stay valid until the handler runs.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer, receive_info& info,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_receive(std::forward<CompletionToken>(token), buffer, &info);
    }

    /// Arms the SRQ's limit (ibv_modify_srq(3), IBV_SRQ_LIMIT) and waits, on
    /// `events` (an async_event_stream of the SRQ's device), for the device to say
    /// that fewer than `limit` receives are posted (IBV_EVENT_SRQ_LIMIT_REACHED),
    /// which disarms it: refill, then wait again. Signature: void(error_code).
    /// Errors: bad_descriptor when this object is not open; the errno of
    /// ibv_modify_srq (EINVAL for a limit beyond the depth); the stream's errors.
    /// Cancellation: as the stream's async_next (the limit stays armed).
    template <class Executor1,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_wait_limit(basic_async_event_stream<Executor1>& events, std::uint32_t limit,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code), detail::start_srq_limit_wait>(
            "rdma_asio::shared_receive_queue::async_wait_limit",
            std::forward<CompletionToken>(token), detail::device_event_wait_of(events), limit);
    }

    /// For tests and counters: receives posted now, and receives waiting for room.
    std::uint32_t posted() const {
        return this->checked("rdma_asio::shared_receive_queue::posted").posted();
    }
    std::size_t waiting() const {
        return this->checked("rdma_asio::shared_receive_queue::waiting").waiting();
    }

    // cancel(): ends every receive still waiting for room (posted ones stay).
    // close(): see above.

private:
    template <class>
    friend class basic_queue_pair;

    static asio::execution_context& context_of(const Executor& ex) noexcept {
        return asio::query(ex, asio::execution::context);
    }

    template <class CompletionToken, class Buffers>
    auto start_receive(CompletionToken&& token, const Buffers& buffers, receive_info* info) {
        detail::qp_request r;
        r.queue = detail::work_queue::receive;
        r.set_buffers(buffers);
        r.info = info;
        r.what = "rdma_asio::shared_receive_queue";
        return this->template initiate<void(error_code, std::size_t),
                                       detail::start_qp_request<std::size_t>>(
            "rdma_asio::shared_receive_queue::async_receive", std::forward<CompletionToken>(token),
            r);
    }
};

/// A shared receive queue on any I/O executor.
using shared_receive_queue = basic_shared_receive_queue<>;

} // namespace rdma_asio
