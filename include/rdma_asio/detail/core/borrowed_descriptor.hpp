// A file descriptor that belongs to someone else (libibverbs, libibumad, ...),
// registered with Asio for readiness only.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <system_error>
#include <utility>
#include <variant>

namespace rdma_asio::detail {

/// Puts a borrowed fd in O_NONBLOCK mode and registers it with the executor's
/// reactor. Destruction (or release()) cancels waits, unregisters the fd without
/// closing it and restores its original file status flags: the owner closes it.
///
/// On an io_context (the usual case) the descriptor is typed on the io_context's
/// own executor, so that a wait on it tracks work without going through
/// any_io_executor's type erasure on every wake-up.
class borrowed_fds;

class borrowed_descriptor {
public:
    /// On failure ec is set and nothing is registered: EEXIST when another
    /// borrowed_descriptor on the same execution context holds the fd (on either
    /// of Asio's backends), fcntl's errno, or the reactor's refusal.
    borrowed_descriptor(const asio::any_io_executor& ex, int fd, error_code& ec);
    borrowed_descriptor(const borrowed_descriptor&) = delete;
    borrowed_descriptor& operator=(const borrowed_descriptor&) = delete;
    ~borrowed_descriptor() { release(); }

    /// Waits until the fd is readable; `handler(error_code)` runs on the
    /// descriptor's executor.
    template <class Handler>
    void async_wait_readable(Handler&& handler) {
        std::visit(
            [&](auto& d) {
                d.async_wait(asio::posix::descriptor_base::wait_read,
                             std::forward<Handler>(handler));
            },
            descriptor_);
    }
    /// Ends the pending wait with operation_aborted.
    void cancel() noexcept {
        std::visit(
            [](auto& d) {
                error_code ignored;
                d.cancel(ignored);
            },
            descriptor_);
    }
    void release() noexcept;

private:
    using io_context_descriptor =
        asio::posix::basic_stream_descriptor<asio::io_context::executor_type>;
    std::variant<io_context_descriptor, asio::posix::stream_descriptor> descriptor_;
    borrowed_fds* fds_; // the execution context's: outlives every descriptor on it
    int fd_ = -1;
    int saved_flags_ = -1;
};

} // namespace rdma_asio::detail
