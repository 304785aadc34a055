#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>
#include <utility>

namespace rdma_asio {

async_event::async_event(const ibv_async_event& raw) noexcept
    : raw_(raw), type_(static_cast<event_type>(raw.event_type)), valid_(true), owns_ack_(true) {}

async_event::async_event(event_type type, int port_num, const ibv_gid& gid) noexcept
    : gid_(gid), type_(type), valid_(true) {
    raw_.element.port_num = port_num;
}

async_event::async_event(async_event&& other) noexcept
    : raw_(other.raw_), gid_(other.gid_), type_(other.type_),
      valid_(std::exchange(other.valid_, false)), owns_ack_(std::exchange(other.owns_ack_, false)) {
}

async_event& async_event::operator=(async_event&& other) noexcept {
    if (this != &other) {
        ack();
        raw_ = other.raw_;
        gid_ = other.gid_;
        type_ = other.type_;
        valid_ = std::exchange(other.valid_, false);
        owns_ack_ = std::exchange(other.owns_ack_, false);
    }
    return *this;
}

event_type async_event::type() const {
    if (!valid_)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::async_event::type: empty event");
    return type_;
}

event_element async_event::element() const {
    if (!valid_)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::async_event::element: empty event");
    return element_of(type_);
}

void async_event::ack() noexcept {
    if (std::exchange(owns_ack_, false))
        ibv_ack_async_event(&raw_);
}

ibv_async_event async_event::release() noexcept {
    owns_ack_ = false;
    return raw_;
}

ibv_cq* async_event::cq() const noexcept {
    return valid_ && element_of(type_) == event_element::cq ? raw_.element.cq : nullptr;
}
ibv_qp* async_event::qp() const noexcept {
    return valid_ && element_of(type_) == event_element::qp ? raw_.element.qp : nullptr;
}
ibv_srq* async_event::srq() const noexcept {
    return valid_ && element_of(type_) == event_element::srq ? raw_.element.srq : nullptr;
}
ibv_wq* async_event::wq() const noexcept {
    return valid_ && element_of(type_) == event_element::wq ? raw_.element.wq : nullptr;
}

int async_event::port_num() const noexcept {
    const auto e = element_of(type_);
    return valid_ && (e == event_element::port || e == event_element::gid) ? raw_.element.port_num
                                                                           : 0;
}

const void* async_event::object() const noexcept {
    switch (element_of(type_)) {
    case event_element::cq:
        return cq();
    case event_element::qp:
        return qp();
    case event_element::srq:
        return srq();
    case event_element::wq:
        return wq();
    default:
        return nullptr;
    }
}

} // namespace rdma_asio
