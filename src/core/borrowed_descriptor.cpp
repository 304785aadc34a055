#include "rdma_asio/detail/core/borrowed_descriptor.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_context_executor.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <fcntl.h>

#include <mutex>
#include <unordered_set>

namespace rdma_asio::detail {

// The fds that borrowed descriptors hold, per execution context. Asio's epoll
// reactor refuses a second registration of one fd (EEXIST from epoll_ctl), but its
// io_uring backend registers nothing and would let two objects wrap one fd and
// race for its events; this keeps the refusal the same on both.
class borrowed_fds : public asio::execution_context::service {
public:
    using key_type = borrowed_fds;
    static inline asio::execution_context::id id;

    explicit borrowed_fds(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

    bool claim(int fd) {
        std::lock_guard lock(mutex_);
        return fds_.insert(fd).second;
    }
    void give_up(int fd) {
        std::lock_guard lock(mutex_);
        fds_.erase(fd);
    }

private:
    void shutdown() override {}

    std::mutex mutex_;
    std::unordered_set<int> fds_;
};

namespace {
borrowed_fds& borrowed_fds_of(const asio::any_io_executor& ex) {
    return asio::use_service<borrowed_fds>(asio::query(ex, asio::execution::context));
}

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
    : descriptor_(make_descriptor(ex)), fds_(&borrowed_fds_of(ex)) {
    ec.clear();
    // EEXIST when another object on this execution context wraps the fd, e.g. two
    // streams on one async_fd: each would take events the other waits for.
    if (fd >= 0 && !fds_->claim(fd)) {
        ec = error_code(EEXIST, asio::error::get_system_category());
        return;
    }
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        ec = last_errno_code();
        fds_->give_up(fd);
        return;
    }
    // The reactor may refuse too (epoll: EEXIST for an fd that an I/O object of
    // the program's own already registered).
    std::visit([&](auto& d) { d.assign(fd, ec); }, descriptor_);
    if (ec) {
        ::fcntl(fd, F_SETFL, flags);
        fds_->give_up(fd);
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
    fds_->give_up(fd_);
    fd_ = -1;
}

} // namespace rdma_asio::detail
