#include "rdma_asio/devx_eventfd.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <sys/eventfd.h>

#include <utility>

namespace rdma_asio {

devx_eventfd::devx_eventfd(const executor_type& ex) : ex_(ex) {
    std::error_code ec;
    *this = devx_eventfd(ex, ec);
    detail::throw_if_error(ec, "eventfd");
}

devx_eventfd::devx_eventfd(const executor_type& ex, std::error_code& ec) : ex_(ex) {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        ec = detail::last_errno_code();
        return;
    }
    // From here the source owns the fd and closes it, also on failure.
    auto impl = std::make_shared<impl_type>(ex, fd);
    impl->open(ec);
    if (ec)
        return;
    fd_ = fd;
    impl_ = std::move(impl);
}

devx_eventfd::devx_eventfd(devx_eventfd&& other) noexcept
    : ex_(other.ex_), fd_(std::exchange(other.fd_, -1)), impl_(std::move(other.impl_)) {}

devx_eventfd& devx_eventfd::operator=(devx_eventfd&& other) noexcept {
    if (this != &other) {
        close();
        ex_ = std::move(other.ex_);
        fd_ = std::exchange(other.fd_, -1);
        impl_ = std::move(other.impl_);
    }
    return *this;
}

devx_eventfd::~devx_eventfd() {
    close();
}

devx_eventfd::impl_type& devx_eventfd::checked_impl() const {
    if (!impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::devx_eventfd: not open");
    return *impl_;
}

void devx_eventfd::cancel() {
    if (impl_)
        impl_->cancel();
}

void devx_eventfd::close() noexcept {
    if (impl_) {
        impl_->close();
        impl_.reset();
        fd_ = -1;
    }
}

} // namespace rdma_asio
