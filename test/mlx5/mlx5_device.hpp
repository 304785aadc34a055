// The mlx5 device the hardware tests use, opened for DEVX.
#pragma once

#include "rdma_asio/device_list.hpp"

#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>

namespace rdma_asio::test {

/// The name of the first device mlx5dv_is_supported() accepts, or "".
inline std::string first_mlx5_device() {
    rdma_asio::error_code ec;
    device_list devices(ec);
    if (ec)
        return {};
    for (device d : devices)
        if (mlx5dv_is_supported(d.native_handle()))
            return std::string(d.name());
    return {};
}

struct close_device {
    void operator()(ibv_context* ctx) const { ibv_close_device(ctx); }
};
using devx_context = std::unique_ptr<ibv_context, close_device>;

/// Opens `name` with mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX).
inline devx_context open_devx(const std::string& name) {
    device_list devices;
    ibv_device* dev = devices.find(name);
    if (dev == nullptr)
        throw rdma_asio::system_error(ENODEV, rdma_asio::asio::error::get_system_category(), name);
    mlx5dv_context_attr attr{};
    attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
    errno = 0;
    devx_context ctx(mlx5dv_open_device(dev, &attr));
    if (!ctx)
        throw rdma_asio::system_error(errno, rdma_asio::asio::error::get_system_category(),
                                      "mlx5dv_open_device");
    return ctx;
}

} // namespace rdma_asio::test
