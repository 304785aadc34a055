#include "rdma_asio/event_type.hpp"

namespace rdma_asio {

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

} // namespace rdma_asio
