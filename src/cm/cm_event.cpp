#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <cerrno>

namespace rdma_asio {

cm_event& cm_event::operator=(cm_event&& other) noexcept {
    if (this != &other) {
        ack();
        raw_ = other.raw_;
        other.raw_ = nullptr;
    }
    return *this;
}

void cm_event::ack() noexcept {
    if (raw_ != nullptr) {
        rdma_ack_cm_event(raw_);
        raw_ = nullptr;
    }
}

rdma_cm_event_type cm_event::type() const {
    if (raw_ == nullptr)
        detail::throw_error(detail::errno_code(EINVAL), "rdma_asio::cm_event::type: empty event");
    return raw_->event;
}

const rdma_conn_param& cm_event::conn_param() const {
    if (raw_ == nullptr)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::cm_event::conn_param: empty event");
    return raw_->param.conn;
}

std::string_view cm_event::name() const noexcept {
    return raw_ ? to_string(raw_->event) : "none";
}

std::string_view to_string(rdma_cm_event_type type) noexcept {
    return rdma_event_str(type);
}

error_code error_of(const cm_event& ev, rdma_cm_event_type expected) noexcept {
    if (!ev)
        return detail::errno_code(EINVAL);
    if (ev.type() == expected)
        return {};
    // Resolution and connection attempts that ran out of time say so in status.
    if (ev.status() == -ETIMEDOUT)
        return detail::errno_code(ETIMEDOUT);
    switch (ev.type()) {
    case RDMA_CM_EVENT_REJECTED:
        return make_error_code(errc::connection_rejected);
    case RDMA_CM_EVENT_UNREACHABLE:
        return make_error_code(errc::peer_unreachable);
    case RDMA_CM_EVENT_ADDR_ERROR:
        return make_error_code(errc::address_error);
    case RDMA_CM_EVENT_ROUTE_ERROR:
        return make_error_code(errc::route_error);
    case RDMA_CM_EVENT_CONNECT_ERROR:
        return make_error_code(errc::connect_error);
    case RDMA_CM_EVENT_DISCONNECTED:
        return make_error_code(errc::disconnected);
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        return make_error_code(errc::device_removed);
    case RDMA_CM_EVENT_MULTICAST_ERROR:
        // The status is the join's negative errno (e.g. -ENODEV, -ENETUNREACH).
        return ev.status() < 0 ? detail::errno_code(-ev.status())
                               : make_error_code(errc::unexpected_cm_event);
    default:
        return make_error_code(errc::unexpected_cm_event);
    }
}

} // namespace rdma_asio
