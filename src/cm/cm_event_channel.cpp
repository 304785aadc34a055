#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

namespace rdma_asio::detail {

std::shared_ptr<cm_channel_impl> open_cm_event_channel(const asio::any_io_executor& ex,
                                                       error_code& ec) {
    errno = 0;
    rdma_event_channel* channel = rdma_create_event_channel();
    if (channel == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    std::shared_ptr<cm_channel_impl> impl;
    try {
        impl = std::make_shared<cm_channel_impl>(ex, channel);
    } catch (...) {
        rdma_destroy_event_channel(channel);
        throw;
    }
    impl->dispatcher->open(ec);
    if (ec)
        return nullptr; // the destructor destroys the channel
    return impl;
}

cm_channel_impl::cm_channel_impl(const asio::any_io_executor& ex, rdma_event_channel* ch)
    : channel(ch), dispatcher(std::make_shared<event_dispatcher<cm_event_source>>(ex, ch)) {}

cm_channel_impl::~cm_channel_impl() {
    // Unregister (and restore) the fd before librdmacm closes it. The events the
    // dispatcher still has, queued or held for handlers that never ran, are
    // acked as it drops them, and connection requests among them rejected.
    dispatcher->close();
    rdma_destroy_event_channel(channel);
}

void drop_connect_request(cm_event& ev) noexcept {
    rdma_cm_id* id = ev && ev.type() == RDMA_CM_EVENT_CONNECT_REQUEST ? ev.id() : nullptr;
    if (id != nullptr)
        rdma_reject(id, nullptr, 0);
    ev.ack();
    if (id != nullptr)
        rdma_destroy_id(id);
}

} // namespace rdma_asio::detail
