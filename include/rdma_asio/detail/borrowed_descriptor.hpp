// A file descriptor that belongs to someone else (libibverbs, libibumad, ...),
// registered with Asio for readiness only.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>

#include <system_error>

namespace rdma_asio::detail {

/// Puts a borrowed fd in O_NONBLOCK mode and registers it with the executor's
/// reactor. Destruction (or release()) cancels waits, unregisters the fd without
/// closing it and restores its original file status flags: the owner closes it.
class borrowed_descriptor {
public:
    /// On failure (fcntl, or the reactor refusing the fd) ec is set and nothing is
    /// registered.
    borrowed_descriptor(const asio::any_io_executor& ex, int fd, std::error_code& ec);
    borrowed_descriptor(const borrowed_descriptor&) = delete;
    borrowed_descriptor& operator=(const borrowed_descriptor&) = delete;
    ~borrowed_descriptor() { release(); }

    asio::posix::stream_descriptor& get() noexcept { return descriptor_; }
    void release() noexcept;

private:
    asio::posix::stream_descriptor descriptor_;
    int fd_ = -1;
    int saved_flags_ = -1;
};

} // namespace rdma_asio::detail
