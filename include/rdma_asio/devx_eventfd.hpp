// An eventfd that DEVX events signal (mlx5dv_devx_subscribe_devx_event_fd), waited
// on through Asio.
#pragma once

#include <rdma_asio/config.hpp>

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/devx/devx_eventfd_impl.hpp"

#include <concepts>
#include <cstdint>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_devx_eventfd;

/// An eventfd (non-blocking, close-on-exec) that this object owns and closes.
/// Subscribe it to a DEVX event with devx_event_channel::subscribe_fd(); the kernel
/// then adds 1 to its counter per event instead of queueing the event on the
/// channel, and async_wait() reports the counter.
///
/// Opening: unlike the other I/O objects, which wrap something that must be
/// named (a device, a channel), an eventfd needs nothing but the executor. So,
/// like an Asio timer, an eventfd constructed from an executor or an execution
/// context is open: the constructor calls eventfd(2) and throws system_error
/// when it fails; the constructor taking a error_code reports instead and
/// leaves the object closed. After close() (or a move), open() makes a new
/// eventfd.
///
/// `Executor` is the type of the executor handlers run on by default;
/// devx_eventfd uses asio::any_io_executor, and rebind_executor (or
/// asio::as_default_on) gives the same object with another executor type or a
/// default completion token. Move-only; a moved-from eventfd is closed and keeps
/// its executor. Every member may be called from any thread.
template <class Executor>
class basic_devx_eventfd
    : public detail::io_object<basic_devx_eventfd, Executor, detail::devx_eventfd_impl> {
    using base = detail::io_object<basic_devx_eventfd, Executor, detail::devx_eventfd_impl>;
    using impl_type = detail::devx_eventfd_impl;

public:
    using typename base::executor_type;
    /// The eventfd (owned by this object); -1 when not open.
    using typename base::native_handle_type;
    using signature = void(error_code, std::uint64_t);

    /// Opens a new eventfd (see open()); throws system_error naming eventfd.
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_devx_eventfd(const detail::executor_or_context<Executor>& ex) : base(ex) {
        open();
    }
    /// The same; on failure `ec` is set and the object is not open.
    basic_devx_eventfd(const detail::executor_or_context<Executor>& ex, error_code& ec) : base(ex) {
        open(ec);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the eventfd (see close()).
    using base::base;
    using base::operator=;

    /// Makes a new eventfd (eventfd(2), counter 0) and registers it with the
    /// executor's reactor. Errors: asio::error::already_open; the errno of
    /// eventfd(2) (EMFILE, ENFILE, ENOMEM); the reactor's refusal.
    void open(error_code& ec) { this->open_with(ec, detail::open_devx_eventfd); }
    /// The same; throws system_error naming eventfd.
    void open() { this->open_or_throw("eventfd (rdma_asio::devx_eventfd::open)"); }

    /// Waits until the counter is non-zero, reads it and resets it.
    ///
    /// Signature: void(error_code, std::uint64_t count), count > 0 events
    /// since the last read. Errors: asio::error::operation_aborted (cancelled, or
    /// closed meanwhile), asio::error::bad_descriptor (the eventfd is not open:
    /// closed or moved from), the errno of read(2).
    ///
    /// Per-operation cancellation: terminal, partial and total; a cancelled wait
    /// reads nothing, the count stays for the next wait; a wait cancelled after it
    /// had read a count gives it back to the next wait. The handler never runs
    /// inside this call and runs on its associated executor (by default the
    /// eventfd's).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<signature, start_wait>("rdma_asio::devx_eventfd::async_wait",
                                                              std::forward<CompletionToken>(token));
    }

    // cancel(): completes every pending wait with operation_aborted; the counter
    // stays. close(): cancels every wait, unregisters and closes the eventfd (a
    // subscription keeps the kernel's reference to it alive). Idempotent.

private:
    struct start_wait {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler) const {
            impl->dispatcher().async_next(io_ex, detail::match_any{},
                                          std::forward<Handler>(handler));
        }
    };
};

/// An eventfd on any I/O executor.
using devx_eventfd = basic_devx_eventfd<>;

} // namespace rdma_asio
