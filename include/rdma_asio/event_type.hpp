// The types of the asynchronous events of an RDMA device, and their names.
#pragma once

#include <infiniband/verbs.h>

#include <string_view>

namespace rdma_asio {

/// Every event type of ibv_get_async_event(3), with the same values as
/// ibv_event_type, plus the subnet events of ibv_register_sm_events (Solaris) and
/// rdma_asio's own removal event.
enum class event_type : int {
    // QP events
    qp_fatal = IBV_EVENT_QP_FATAL,
    qp_req_err = IBV_EVENT_QP_REQ_ERR,
    qp_access_err = IBV_EVENT_QP_ACCESS_ERR,
    comm_est = IBV_EVENT_COMM_EST,
    sq_drained = IBV_EVENT_SQ_DRAINED,
    path_mig = IBV_EVENT_PATH_MIG,
    path_mig_err = IBV_EVENT_PATH_MIG_ERR,
    qp_last_wqe_reached = IBV_EVENT_QP_LAST_WQE_REACHED,
    // CQ events
    cq_err = IBV_EVENT_CQ_ERR,
    // SRQ events
    srq_err = IBV_EVENT_SRQ_ERR,
    srq_limit_reached = IBV_EVENT_SRQ_LIMIT_REACHED,
    // WQ events
    wq_fatal = IBV_EVENT_WQ_FATAL,
    // port events
    port_active = IBV_EVENT_PORT_ACTIVE,
    port_err = IBV_EVENT_PORT_ERR,
    lid_change = IBV_EVENT_LID_CHANGE,
    pkey_change = IBV_EVENT_PKEY_CHANGE,
    sm_change = IBV_EVENT_SM_CHANGE,
    client_reregister = IBV_EVENT_CLIENT_REREGISTER,
    gid_change = IBV_EVENT_GID_CHANGE,
    // CA events
    device_fatal = IBV_EVENT_DEVICE_FATAL,
    // subnet events (ibv_register_sm_events), carrying a GID
    mcg_created = 0x100,
    mcg_deleted,
    gid_avail,
    gid_unavail,
    // rdma_asio: the device went away without a DEVICE_FATAL (uverbs node deleted,
    // or the async fd failed)
    device_removed = 0x200,
};

/// The name the seeds use, e.g. "IBV_EVENT_PORT_ACTIVE", "IBV_SM_EVENT_GID_AVAIL";
/// "RDMA_ASIO_EVENT_DEVICE_REMOVED"; "unknown" for a value outside the enum.
std::string_view to_string(event_type type) noexcept;
/// True for the events that end a device: device_fatal and device_removed.
constexpr bool is_removal(event_type type) noexcept {
    return type == event_type::device_fatal || type == event_type::device_removed;
}

} // namespace rdma_asio
