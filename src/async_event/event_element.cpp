#include "rdma_asio/event_element.hpp"

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

} // namespace rdma_asio
