#include "rdma_asio/detail/borrowed_descriptor.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <fcntl.h>

namespace rdma_asio::detail {

borrowed_descriptor::borrowed_descriptor(const asio::any_io_executor& ex, int fd,
                                         std::error_code& ec)
    : descriptor_(ex) {
    ec.clear();
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        ec = last_errno_code();
        return;
    }
    // Registration fails with EEXIST when the fd is already in this reactor, e.g.
    // when two objects wrap one async_fd.
    descriptor_.assign(fd, ec);
    if (ec) {
        ::fcntl(fd, F_SETFL, flags);
        return;
    }
    fd_ = fd;
    saved_flags_ = flags;
}

void borrowed_descriptor::release() noexcept {
    if (fd_ < 0)
        return;
    std::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.release();
    ::fcntl(fd_, F_SETFL, saved_flags_);
    fd_ = -1;
}

} // namespace rdma_asio::detail
