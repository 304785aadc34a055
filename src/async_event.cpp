#include "rdma_asio/async_event.hpp"

#include <utility>

namespace rdma_asio {

event_element element_of(event_type type) noexcept {
    switch (type) {
    case event_type::cq_err:
        return event_element::cq;
    case event_type::qp_fatal:
    case event_type::qp_req_err:
    case event_type::qp_access_err:
    case event_type::comm_est:
    case event_type::sq_drained:
    case event_type::path_mig:
    case event_type::path_mig_err:
    case event_type::qp_last_wqe_reached:
        return event_element::qp;
    case event_type::srq_err:
    case event_type::srq_limit_reached:
        return event_element::srq;
    case event_type::wq_fatal:
        return event_element::wq;
    case event_type::port_active:
    case event_type::port_err:
    case event_type::lid_change:
    case event_type::pkey_change:
    case event_type::sm_change:
    case event_type::client_reregister:
    case event_type::gid_change:
        return event_element::port;
    case event_type::mcg_created:
    case event_type::mcg_deleted:
    case event_type::gid_avail:
    case event_type::gid_unavail:
        return event_element::gid;
    case event_type::device_fatal:
    case event_type::device_removed:
        return event_element::device;
    }
    // Values libibverbs may add later carry a port number in the union.
    return event_element::port;
}

std::string_view to_string(event_type type) noexcept {
    switch (type) {
    case event_type::qp_fatal:
        return "IBV_EVENT_QP_FATAL";
    case event_type::qp_req_err:
        return "IBV_EVENT_QP_REQ_ERR";
    case event_type::qp_access_err:
        return "IBV_EVENT_QP_ACCESS_ERR";
    case event_type::comm_est:
        return "IBV_EVENT_COMM_EST";
    case event_type::sq_drained:
        return "IBV_EVENT_SQ_DRAINED";
    case event_type::path_mig:
        return "IBV_EVENT_PATH_MIG";
    case event_type::path_mig_err:
        return "IBV_EVENT_PATH_MIG_ERR";
    case event_type::qp_last_wqe_reached:
        return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case event_type::cq_err:
        return "IBV_EVENT_CQ_ERR";
    case event_type::srq_err:
        return "IBV_EVENT_SRQ_ERR";
    case event_type::srq_limit_reached:
        return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case event_type::wq_fatal:
        return "IBV_EVENT_WQ_FATAL";
    case event_type::port_active:
        return "IBV_EVENT_PORT_ACTIVE";
    case event_type::port_err:
        return "IBV_EVENT_PORT_ERR";
    case event_type::lid_change:
        return "IBV_EVENT_LID_CHANGE";
    case event_type::pkey_change:
        return "IBV_EVENT_PKEY_CHANGE";
    case event_type::sm_change:
        return "IBV_EVENT_SM_CHANGE";
    case event_type::client_reregister:
        return "IBV_EVENT_CLIENT_REREGISTER";
    case event_type::gid_change:
        return "IBV_EVENT_GID_CHANGE";
    case event_type::device_fatal:
        return "IBV_EVENT_DEVICE_FATAL";
    case event_type::mcg_created:
        return "IBV_SM_EVENT_MCG_CREATED";
    case event_type::mcg_deleted:
        return "IBV_SM_EVENT_MCG_DELETED";
    case event_type::gid_avail:
        return "IBV_SM_EVENT_GID_AVAIL";
    case event_type::gid_unavail:
        return "IBV_SM_EVENT_GID_UNAVAIL";
    case event_type::device_removed:
        return "RDMA_ASIO_EVENT_DEVICE_REMOVED";
    }
    return "unknown";
}

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

void async_event::ack() noexcept {
    if (std::exchange(owns_ack_, false))
        ibv_ack_async_event(&raw_);
}

ibv_async_event async_event::release() noexcept {
    owns_ack_ = false;
    return raw_;
}

ibv_cq* async_event::cq() const noexcept {
    return valid_ && element() == event_element::cq ? raw_.element.cq : nullptr;
}
ibv_qp* async_event::qp() const noexcept {
    return valid_ && element() == event_element::qp ? raw_.element.qp : nullptr;
}
ibv_srq* async_event::srq() const noexcept {
    return valid_ && element() == event_element::srq ? raw_.element.srq : nullptr;
}
ibv_wq* async_event::wq() const noexcept {
    return valid_ && element() == event_element::wq ? raw_.element.wq : nullptr;
}

int async_event::port_num() const noexcept {
    auto e = element();
    return valid_ && (e == event_element::port || e == event_element::gid) ? raw_.element.port_num
                                                                           : 0;
}

const void* async_event::object() const noexcept {
    switch (element()) {
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
