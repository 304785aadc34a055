#include "rdma_asio/detail/borrowed_descriptor.hpp"
#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/io_context_executor.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <fcntl.h>

namespace rdma_asio::detail {

namespace {
// The io_context's own executor when `ex` is one, so that waits skip the type
// erasure (checked: see io_context_executor_of).
auto make_descriptor(const asio::any_io_executor& ex) {
    using result =
        std::variant<asio::posix::basic_stream_descriptor<asio::io_context::executor_type>,
                     asio::posix::stream_descriptor>;
    if (const auto* io_ex = io_context_executor_of(ex))
        return result(std::in_place_index<0>, *io_ex);
    return result(std::in_place_index<1>, ex);
}
} // namespace

borrowed_descriptor::borrowed_descriptor(const asio::any_io_executor& ex, int fd, error_code& ec)
    : descriptor_(make_descriptor(ex)) {
    ec.clear();
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        ec = last_errno_code();
        return;
    }
    // Registration fails with EEXIST when the fd is already in this reactor, e.g.
    // when two objects wrap one async_fd.
    std::visit([&](auto& d) { d.assign(fd, ec); }, descriptor_);
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
    std::visit(
        [](auto& d) {
            error_code ignored;
            d.cancel(ignored);
            d.release();
        },
        descriptor_);
    ::fcntl(fd_, F_SETFL, saved_flags_);
    fd_ = -1;
}

} // namespace rdma_asio::detail
