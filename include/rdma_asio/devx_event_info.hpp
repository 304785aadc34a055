// What a read of a DEVX event channel completes with.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdma_asio {

/// The value of devx_event_channel::async_next: the event's cookie and the
/// number of bytes of its device data (the EQE) written to the caller's buffer.
struct devx_event_info {
    /// The cookie given to subscribe().
    std::uint64_t cookie = 0;
    /// Bytes of device data written to the buffer (0 in omit-data mode); with
    /// asio::error::message_size, the size the buffer needs.
    std::size_t size = 0;
};

} // namespace rdma_asio
