#include "rdma_asio/detail/devx/devx_event_source.hpp"

#include <cstring>
#include <new>

namespace rdma_asio::detail {

int devx_event_source::read_one(devx_event& ev) noexcept {
    alignas(mlx5dv_devx_async_event_hdr) std::byte buffer[read_size];
    auto* hdr = reinterpret_cast<mlx5dv_devx_async_event_hdr*>(buffer);
    errno = 0;
    const ssize_t n = opts_.get_event(channel_, hdr, sizeof buffer);
    if (n < 0) {
        const int e = errno != 0 ? errno : EIO;
        if (e != EOVERFLOW)
            return e;
        // Delivered in its place, once, like any event; the channel goes on.
        ev.lost = true;
        return 0;
    }
    if (static_cast<std::size_t>(n) < sizeof hdr->cookie)
        return EIO; // the kernel never returns less than the cookie
    ++events_read_;
    ev.cookie = hdr->cookie;
    ev.size = static_cast<std::size_t>(n) - sizeof hdr->cookie;
    try {
        ev.data.assign(buffer + sizeof hdr->cookie, buffer + n);
    } catch (const std::bad_alloc&) {
        // Read but not kept: to the reader it is a lost event like EOVERFLOW's.
        ev = devx_event{};
        ev.lost = true;
    }
    return 0;
}

} // namespace rdma_asio::detail
