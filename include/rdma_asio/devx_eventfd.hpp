// An eventfd that DEVX events signal (mlx5dv_devx_subscribe_devx_event_fd), waited
// on through Asio.
#pragma once

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/detail/event_dispatcher.hpp"
#include "rdma_asio/detail/eventfd_source.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/execution_context.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <system_error>

namespace rdma_asio {

/// An eventfd (non-blocking, close-on-exec) that this object owns and closes.
/// Subscribe it to a DEVX event with devx_event_channel::subscribe_fd(); the kernel
/// then adds 1 to its counter per event instead of queueing the event on the
/// channel, and async_wait() reports the counter.
///
/// Move-only; every member may be called from any thread.
class devx_eventfd {
public:
    using executor_type = asio::any_io_executor;

    /// eventfd(2); throws std::system_error naming the call.
    explicit devx_eventfd(const executor_type& ex);
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    explicit devx_eventfd(ExecutionContext& ioc) : devx_eventfd(ioc.get_executor()) {}
    /// As above; on failure ec is set and the object is not open.
    devx_eventfd(const executor_type& ex, std::error_code& ec);

    devx_eventfd(devx_eventfd&& other) noexcept;
    devx_eventfd& operator=(devx_eventfd&& other) noexcept;
    devx_eventfd(const devx_eventfd&) = delete;
    devx_eventfd& operator=(const devx_eventfd&) = delete;
    /// Closes the eventfd (see close()).
    ~devx_eventfd();

    executor_type get_executor() const noexcept { return ex_; }
    /// The eventfd; -1 when not open.
    int native_handle() const noexcept { return fd_; }
    bool is_open() const noexcept { return impl_ != nullptr; }

    /// Waits until the counter is non-zero, reads it and resets it.
    ///
    /// Signature: void(std::error_code, std::uint64_t count), count > 0 events
    /// since the last read. Errors: asio::error::operation_aborted (cancelled or
    /// closed), the errno of read(2).
    ///
    /// Per-operation cancellation: terminal, partial and total; a cancelled wait
    /// reads nothing, the count stays for the next wait; a wait cancelled after it
    /// had read a count gives it back to the next wait. The handler never runs
    /// inside this call and runs on its associated executor.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return checked_impl().async_next(detail::match_any{}, std::forward<CompletionToken>(token));
    }

    /// Completes every pending wait with operation_aborted.
    void cancel();
    /// Cancels every wait, unregisters and closes the eventfd (a subscription
    /// keeps the kernel's reference to it alive). Idempotent.
    void close() noexcept;

private:
    using impl_type = detail::event_dispatcher<detail::eventfd_source>;
    impl_type& checked_impl() const;

    executor_type ex_;
    int fd_ = -1;
    std::shared_ptr<impl_type> impl_;
};

} // namespace rdma_asio
