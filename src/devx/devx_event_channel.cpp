#include "rdma_asio/devx_event_channel.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>
#include <utility>

namespace rdma_asio {
namespace detail {
namespace {

std::shared_ptr<devx_event_channel_impl> create_and_open(const asio::any_io_executor& ex,
                                                         ibv_context* ctx, devx_event_data mode,
                                                         std::shared_ptr<ibv_context> device,
                                                         error_code& ec, const char*& failed_call) {
    if (ctx == nullptr) {
        failed_call = "rdma_asio::devx_event_channel::open: the context is not open";
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    if (!mlx5dv_is_supported(ctx->device)) {
        failed_call = "mlx5dv_is_supported: not an mlx5 device";
        ec = errno_code(EOPNOTSUPP);
        return nullptr;
    }
    const auto flags = static_cast<mlx5dv_devx_create_event_channel_flags>(
        mode == devx_event_data::omit_data ? MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA
                                           : 0);
    errno = 0;
    mlx5dv_devx_event_channel* channel = mlx5dv_devx_create_event_channel(ctx, flags);
    if (channel == nullptr) {
        failed_call = "mlx5dv_devx_create_event_channel";
        ec = errno != 0 ? last_errno_code() : errno_code(EIO);
        return nullptr;
    }
    failed_call = "rdma_asio::devx_event_channel::open: registering the channel fd";
    return devx_event_channel_impl::open(ex, channel, true, mode, {}, std::move(device), ec);
}

} // namespace

std::shared_ptr<devx_event_channel_impl>
open_devx_event_channel(const asio::any_io_executor& ex, ibv_context* ctx, devx_event_data mode,
                        error_code& ec, const char*& failed_call) {
    return create_and_open(ex, ctx, mode, nullptr, ec, failed_call);
}

std::shared_ptr<devx_event_channel_impl>
open_devx_event_channel(const asio::any_io_executor& ex, const context& ctx, devx_event_data mode,
                        error_code& ec, const char*& failed_call) {
    // A closed context has no handle and fails as a null one does.
    return create_and_open(ex, ctx.native_handle(), mode, ctx.share(), ec, failed_call);
}

std::shared_ptr<devx_event_channel_impl>
devx_event_channel_impl::open(const asio::any_io_executor& ex, mlx5dv_devx_event_channel* channel,
                              bool owned, devx_event_data mode, devx_event_source::options opts,
                              std::shared_ptr<ibv_context> device, error_code& ec) {
    // Made before the registration, so that a failure destroys an owned channel.
    auto impl = std::make_shared<devx_event_channel_impl>(ex, channel, owned, mode, opts,
                                                          std::move(device));
    ec.clear();
    impl->dispatcher_->open(ec);
    if (ec)
        return nullptr;
    return impl;
}

devx_event_channel_impl::devx_event_channel_impl(const asio::any_io_executor& ex,
                                                 mlx5dv_devx_event_channel* channel, bool owned,
                                                 devx_event_data mode,
                                                 devx_event_source::options opts,
                                                 std::shared_ptr<ibv_context> device)
    : dispatcher_state(channel, ex, channel, opts), owned_(owned), mode_(mode),
      device_(std::move(device)) {}

void devx_event_channel_impl::close() noexcept {
    // Unregister (and restore) the fd before rdma-core closes it; the device goes
    // last: the channel needed it open.
    dispatcher_->close();
    if (owned_ && handle_ != nullptr)
        mlx5dv_devx_destroy_event_channel(handle_);
    owned_ = false;
    device_.reset();
}

void devx_event_channel_impl::subscribe(mlx5dv_devx_obj* obj,
                                        std::span<const std::uint16_t> event_nums,
                                        std::uint64_t cookie, error_code& ec) {
    // The C API takes a non-const array that it only reads.
    errno = 0;
    int rc = mlx5dv_devx_subscribe_devx_event(
        handle_, obj, static_cast<std::uint16_t>(event_nums.size_bytes()),
        const_cast<std::uint16_t*>(event_nums.data()), cookie);
    ec = rc == 0 ? error_code() : errno_code(rc > 0 ? rc : errno != 0 ? errno : EIO);
}

void devx_event_channel_impl::subscribe_fd(int fd, mlx5dv_devx_obj* obj, std::uint16_t event_num,
                                           error_code& ec) {
    errno = 0;
    int rc = mlx5dv_devx_subscribe_devx_event_fd(handle_, fd, obj, event_num);
    ec = rc == 0 ? error_code() : errno_code(rc > 0 ? rc : errno != 0 ? errno : EIO);
}

} // namespace detail
} // namespace rdma_asio
