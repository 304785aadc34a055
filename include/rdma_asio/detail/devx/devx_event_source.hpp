// The event source behind devx_event_channel: mlx5dv_devx_get_event() on the DEVX
// event channel's fd, one event per read, until EAGAIN.
#pragma once

#include <rdma_asio/config.hpp>

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/detail/core/read_loop.hpp"

#include <infiniband/mlx5dv.h>

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdma_asio::detail {

/// One read of the channel, kept until a waiter takes it.
struct devx_event {
    std::uint64_t cookie = 0;
    /// The read reported EOVERFLOW: events before this point were lost.
    bool lost = false;
    /// Bytes of device data (the EQE) after the cookie; 0 in omit-data mode.
    std::size_t size = 0;
    /// Those bytes; empty in the answer to a read whose buffer was too small.
    std::vector<std::byte> data;
};

class devx_event_source {
public:
    using value_type = devx_event;
    using get_event_fn = ssize_t (*)(mlx5dv_devx_event_channel*, mlx5dv_devx_async_event_hdr*,
                                     size_t);

    struct options {
        /// mlx5dv_devx_get_event; replaceable only so unit tests can imitate the kernel.
        get_event_fn get_event = &mlx5dv_devx_get_event;
    };

    /// Larger than any event the kernel makes (8-byte cookie + 64-byte EQE): a read
    /// into a smaller buffer fails with EINVAL and leaves the event queued.
    static constexpr std::size_t read_size = 4096;

    devx_event_source(mlx5dv_devx_event_channel* channel, options opts) noexcept
        : channel_(channel), opts_(opts) {}

    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept { return channel_->fd; }

    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        read_until_would_block<devx_event>(sink, [this](devx_event& ev) noexcept {
            // EIO (the channel is being destroyed) and the rest are final.
            const int error = read_one(ev);
            return error == 0 ? read_result::event() : read_result::from_errno(error);
        });
    }

    void close() noexcept {}

    std::uint64_t events_read() const noexcept { return events_read_; }

private:
    // 0 with `ev` filled (an EOVERFLOW read is an event with lost set), or errno.
    int read_one(devx_event& ev) noexcept;

    mlx5dv_devx_event_channel* channel_;
    options opts_;
    std::uint64_t events_read_ = 0;
};

} // namespace rdma_asio::detail
