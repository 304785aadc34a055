// The state of an open devx_event_channel (non-template, see
// src/devx/devx_event_channel.cpp).
#pragma once

#include <rdma_asio/config.hpp>

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/dispatcher_state.hpp"
#include "rdma_asio/detail/devx/devx_event_source.hpp"

#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

namespace rdma_asio {
enum class devx_event_data; // devx_event_channel.hpp
} // namespace rdma_asio

namespace rdma_asio::detail {

class devx_event_channel_impl
    : public dispatcher_state<devx_event_source, mlx5dv_devx_event_channel*, nullptr> {
public:
    /// Registers `channel`'s fd with the executor's reactor. With `owned`, the
    /// channel is destroyed by close() (and here when the registration fails);
    /// otherwise it is the caller's (a test's imitation of the kernel). `device`
    /// shares ownership of the device (empty for a context owned elsewhere). Null
    /// with `ec` set when the fd cannot be registered.
    static std::shared_ptr<devx_event_channel_impl>
    open(const asio::any_io_executor& ex, mlx5dv_devx_event_channel* channel, bool owned,
         devx_event_data mode, devx_event_source::options opts, std::shared_ptr<ibv_context> device,
         error_code& ec);

    devx_event_channel_impl(const asio::any_io_executor& ex, mlx5dv_devx_event_channel* channel,
                            bool owned, devx_event_data mode, devx_event_source::options opts,
                            std::shared_ptr<ibv_context> device);
    ~devx_event_channel_impl() { close(); }

    devx_event_data mode() const noexcept { return mode_; }
    /// Unregisters the fd (restoring its flags), drops the kept events, destroys
    /// the channel when owned, then lets the device go. Idempotent.
    void close() noexcept;

    void subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                   std::uint64_t cookie, error_code& ec);
    void subscribe_fd(int fd, mlx5dv_devx_obj* obj, std::uint16_t event_num, error_code& ec);
    std::size_t queued() const { return dispatcher_->queued(); }

private:
    bool owned_;
    devx_event_data mode_;
    std::shared_ptr<ibv_context> device_; // when opened on a context
};

} // namespace rdma_asio::detail
