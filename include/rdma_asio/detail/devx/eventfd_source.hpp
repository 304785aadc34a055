// The event source behind devx_eventfd: an eventfd(2) the source owns. Each read
// returns the counter (how many times the kernel signalled it since the last read)
// and resets it, so one wake-up is one event carrying a count.
#pragma once

#include "rdma_asio/detail/core/read_loop.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace rdma_asio::detail {

class eventfd_source {
public:
    using value_type = std::uint64_t;

    /// Takes ownership of `fd`, closed by close().
    explicit eventfd_source(int fd) noexcept : fd_(fd) {}
    eventfd_source(const eventfd_source&) = delete;
    eventfd_source& operator=(const eventfd_source&) = delete;
    ~eventfd_source() { close(); }

    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept { return fd_; }

    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        // read(2) itself rather than eventfd_read(3), its wrapper: one call less
        // per read, and a drain reads twice per event (the event, then EAGAIN).
        // An eventfd's read returns the whole 8-byte counter or fails with errno.
        read_until_would_block<value_type>(sink, [this](value_type& count) noexcept {
            if (::read(fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count))
                return read_result::event();
            return read_result::from_errno(errno);
        });
    }

    void close() noexcept {
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }

private:
    int fd_;
};

} // namespace rdma_asio::detail
