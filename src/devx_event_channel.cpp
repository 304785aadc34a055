#include "rdma_asio/devx_event_channel.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <utility>

namespace rdma_asio {

devx_event_channel::devx_event_channel(const executor_type& ex, ibv_context* ctx,
                                       devx_event_data mode)
    : ex_(ex), mode_(mode) {
    if (ctx == nullptr)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::devx_event_channel");
    if (!mlx5dv_is_supported(ctx->device))
        detail::throw_error(detail::errno_code(EOPNOTSUPP),
                            "mlx5dv_is_supported: not an mlx5 device");
    const auto flags = static_cast<mlx5dv_devx_create_event_channel_flags>(
        mode == devx_event_data::omit_data ? MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA
                                           : 0);
    errno = 0;
    channel_ = mlx5dv_devx_create_event_channel(ctx, flags);
    if (channel_ == nullptr)
        detail::throw_error(detail::last_errno_code(), "mlx5dv_devx_create_event_channel");
    owned_ = true;
    std::error_code ec;
    open({}, ec);
    detail::throw_if_error(ec, "rdma_asio::devx_event_channel: registering the channel fd");
}

devx_event_channel::devx_event_channel(const executor_type& ex, ibv_context* ctx,
                                       devx_event_data mode, std::error_code& ec)
    : ex_(ex), mode_(mode) {
    try {
        *this = devx_event_channel(ex, ctx, mode);
        ec.clear();
    } catch (const std::system_error& e) {
        ec = e.code();
    }
}

devx_event_channel::devx_event_channel(const executor_type& ex, mlx5dv_devx_event_channel* channel,
                                       devx_event_data mode,
                                       detail::devx_event_source::options opts)
    : ex_(ex), channel_(channel), mode_(mode) {
    std::error_code ec;
    open(opts, ec);
    detail::throw_if_error(ec, "rdma_asio::devx_event_channel: registering the channel fd");
}

void devx_event_channel::open(detail::devx_event_source::options opts, std::error_code& ec) {
    impl_ = std::make_shared<impl_type>(ex_, channel_, opts);
    impl_->open(ec);
    if (ec)
        close();
}

devx_event_channel::devx_event_channel(devx_event_channel&& other) noexcept
    : ex_(other.ex_), channel_(std::exchange(other.channel_, nullptr)),
      owned_(std::exchange(other.owned_, false)), mode_(other.mode_), impl_(std::move(other.impl_)),
      device_(std::move(other.device_)) {}

devx_event_channel& devx_event_channel::operator=(devx_event_channel&& other) noexcept {
    if (this != &other) {
        close();
        ex_ = std::move(other.ex_);
        channel_ = std::exchange(other.channel_, nullptr);
        owned_ = std::exchange(other.owned_, false);
        mode_ = other.mode_;
        impl_ = std::move(other.impl_);
        device_ = std::move(other.device_);
    }
    return *this;
}

devx_event_channel::~devx_event_channel() {
    close();
}

const std::shared_ptr<devx_event_channel::impl_type>& devx_event_channel::checked_impl_ptr() const {
    if (!impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::devx_event_channel: not open");
    return impl_;
}

void devx_event_channel::subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                                   std::uint64_t cookie, std::error_code& ec) {
    if (!impl_) {
        ec = detail::errno_code(EBADF);
        return;
    }
    // The C API takes a non-const array that it only reads.
    int rc = mlx5dv_devx_subscribe_devx_event(
        channel_, obj, static_cast<std::uint16_t>(event_nums.size_bytes()),
        const_cast<std::uint16_t*>(event_nums.data()), cookie);
    ec = rc == 0 ? std::error_code() : detail::errno_code(rc > 0 ? rc : errno);
}

void devx_event_channel::subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                                   std::uint64_t cookie) {
    std::error_code ec;
    subscribe(obj, event_nums, cookie, ec);
    detail::throw_if_error(ec, "mlx5dv_devx_subscribe_devx_event");
}

void devx_event_channel::subscribe_fd(devx_eventfd& efd, mlx5dv_devx_obj* obj,
                                      std::uint16_t event_num, std::error_code& ec) {
    if (!impl_ || !efd.is_open()) {
        ec = detail::errno_code(EBADF);
        return;
    }
    int rc = mlx5dv_devx_subscribe_devx_event_fd(channel_, efd.native_handle(), obj, event_num);
    ec = rc == 0 ? std::error_code() : detail::errno_code(rc > 0 ? rc : errno);
}

void devx_event_channel::subscribe_fd(devx_eventfd& efd, mlx5dv_devx_obj* obj,
                                      std::uint16_t event_num) {
    std::error_code ec;
    subscribe_fd(efd, obj, event_num, ec);
    detail::throw_if_error(ec, "mlx5dv_devx_subscribe_devx_event_fd");
}

void devx_event_channel::cancel() {
    if (impl_)
        impl_->cancel();
}

void devx_event_channel::close() noexcept {
    if (impl_) {
        // Unregister (and restore) the fd before rdma-core closes it.
        impl_->close();
        impl_.reset();
    }
    if (owned_ && channel_ != nullptr)
        mlx5dv_devx_destroy_event_channel(channel_);
    channel_ = nullptr;
    owned_ = false;
    device_.reset(); // last: the channel needed the device open
}

std::size_t devx_event_channel::queued() const {
    return checked_impl_ptr()->queued();
}

} // namespace rdma_asio
