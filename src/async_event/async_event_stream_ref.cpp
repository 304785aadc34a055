#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/detail/async_event/async_event_stream_impl.hpp"

#include <utility>

namespace rdma_asio {

bool async_event_stream_ref::deliver(async_event ev) const {
    return impl_->dispatcher().inject(std::move(ev));
}

event_subscription async_event_stream_ref::observe_ports(port_observer observer) const {
    const std::uint64_t id = impl_->dispatcher().with_source(
        [&](detail::async_event_source& s) { return s.add_port_observer(std::move(observer)); });
    return event_subscription(impl_, id);
}

event_subscription async_event_stream_ref::observe(const ibv_qp* qp,
                                                   object_observer observer) const {
    return observe_object(qp, std::move(observer));
}

event_subscription async_event_stream_ref::observe(const ibv_cq* cq,
                                                   object_observer observer) const {
    return observe_object(cq, std::move(observer));
}

event_subscription async_event_stream_ref::observe_object(const void* object,
                                                          object_observer observer) const {
    const std::uint64_t id = impl_->dispatcher().with_source([&](detail::async_event_source& s) {
        return s.add_object_observer(object, std::move(observer));
    });
    return event_subscription(impl_, id);
}

event_subscription::event_subscription(event_subscription&& other) noexcept
    : impl_(std::move(other.impl_)), id_(std::exchange(other.id_, 0)) {}

event_subscription& event_subscription::operator=(event_subscription&& other) noexcept {
    if (this != &other) {
        reset();
        impl_ = std::move(other.impl_);
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

void event_subscription::reset() noexcept {
    const std::uint64_t id = std::exchange(id_, 0);
    // The stream's state gone means its source, and the observer with it, are gone.
    if (auto impl = std::exchange(impl_, {}).lock(); impl && id != 0)
        impl->dispatcher().with_source(
            [&](detail::async_event_source& s) { s.remove_observer(id); });
}

} // namespace rdma_asio
