#include "rdma_asio/devx_eventfd.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <sys/eventfd.h>

#include <utility>

namespace rdma_asio::detail {

std::shared_ptr<devx_eventfd_impl> open_devx_eventfd(const asio::any_io_executor& ex,
                                                     error_code& ec) {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        ec = last_errno_code();
        return nullptr;
    }
    return devx_eventfd_impl::open(ex, fd, ec);
}

std::shared_ptr<devx_eventfd_impl> devx_eventfd_impl::open(const asio::any_io_executor& ex, int fd,
                                                           error_code& ec) {
    // From here the source owns the fd and closes it, also on failure.
    auto impl = std::make_shared<devx_eventfd_impl>(ex, fd);
    ec.clear();
    impl->dispatcher_->open(ec);
    if (ec)
        return nullptr;
    return impl;
}

devx_eventfd_impl::devx_eventfd_impl(const asio::any_io_executor& ex, int fd)
    : dispatcher_state(fd, ex, fd) {}

} // namespace rdma_asio::detail
