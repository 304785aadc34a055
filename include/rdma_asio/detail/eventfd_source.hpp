// The event source behind devx_eventfd: an eventfd(2) the source owns. Each read
// returns the counter (how many times the kernel signalled it since the last read)
// and resets it, so one wake-up is one event carrying a count.
#pragma once

#include "rdma_asio/detail/read_loop.hpp"

#include <sys/eventfd.h>
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
        read_until_would_block<value_type>(sink, [this](value_type& count) noexcept {
            eventfd_t value = 0;
            errno = 0;
            if (::eventfd_read(fd_, &value) != 0)
                return read_result::from_errno(errno);
            count = value;
            return read_result::event();
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
