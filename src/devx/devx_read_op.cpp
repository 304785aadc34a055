#include "rdma_asio/detail/devx/devx_read_op.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/error.hpp"

#include <cstring>

namespace rdma_asio::detail {

error_code devx_read_matcher::refuse(const devx_event& ev, devx_event& out) const {
    if (ev.lost || ev.size <= capacity)
        return {};
    // Never truncate: say how much is needed and leave the event in line.
    out.cookie = ev.cookie;
    out.size = ev.size;
    return asio::error::message_size;
}

devx_event_info finish_read(error_code& ec, const devx_event& ev,
                            const asio::mutable_buffer& buffer) noexcept {
    if (!ec && ev.lost)
        ec = make_error_code(errc::events_lost);
    devx_event_info info{ev.cookie, ev.size};
    if (!ec && ev.size > 0)
        std::memcpy(buffer.data(), ev.data.data(), ev.size);
    return info;
}

} // namespace rdma_asio::detail
