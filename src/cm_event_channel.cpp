#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/detail/throw_error.hpp"

namespace rdma_asio {
namespace detail {

cm_channel_impl::cm_channel_impl(const asio::any_io_executor& ex) {
    errno = 0;
    channel = rdma_create_event_channel();
    if (channel == nullptr)
        throw_error(last_errno_code(), "rdma_create_event_channel");
    dispatcher = std::make_shared<event_dispatcher<cm_event_source>>(ex, channel);
    std::error_code ec;
    dispatcher->open(ec);
    if (ec) {
        dispatcher.reset();
        rdma_destroy_event_channel(channel);
        throw_error(ec, "rdma_asio::cm_event_channel: registering the channel fd");
    }
}

cm_channel_impl::~cm_channel_impl() {
    // Events of operations whose handlers never ran (their executor is gone).
    for (cm_event& ev : held.take_all())
        drop_connect_request(ev);
    // Unregister (and restore) the fd before librdmacm closes it; queued events
    // are acked as the dispatcher drops them.
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

} // namespace detail

cm_event_channel::cm_event_channel(const executor_type& ex)
    : ex_(ex), impl_(std::make_shared<detail::cm_channel_impl>(ex)) {}

void cm_event_channel::cancel() {
    if (impl_)
        impl_->dispatcher->cancel();
}

} // namespace rdma_asio
