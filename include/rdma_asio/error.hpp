// Error codes of rdma_asio.
//
// Failures of a verbs call are reported with the call's errno in Asio's system
// category (asio::error::get_system_category()), so they compare equal to Asio's own
// errors such as asio::error::operation_aborted. Conditions that have no errno of
// their own are rdma_asio::errc values in rdma_asio's category.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <string>
#include <type_traits>

namespace rdma_asio {

/// Conditions rdma_asio reports that are not a single errno.
enum class errc {
    /// The kernel has no RDMA support (ibv_get_device_list failed with ENOSYS):
    /// no uverbs ABI in sysfs, e.g. a kernel built without CONFIG_INFINIBAND.
    no_kernel_support = 1,
    /// RDMA is supported but no device exists.
    no_device,
    /// No device has the requested name.
    device_not_found,
    /// A port number outside 1..phys_port_cnt.
    invalid_port,
    /// The device is gone (DEVICE_FATAL, its uverbs node deleted, or its event fd
    /// failed): every later wait on it fails; only closing objects is still useful.
    device_removed,
    /// The port has no subnet manager to ask: a RoCE (Ethernet) port, or an
    /// InfiniBand port whose SM LID is 0 (no SM has swept the subnet yet).
    no_subnet_manager,
    /// The subnet administrator answered a request with a non-zero MAD status
    /// (e.g. 0x0200 for a refused InformInfo).
    sa_request_refused,
    /// A MAD too short or inconsistent to decode; nothing was read past its end.
    malformed_mad,
    /// A DEVX event channel lost events (its read reported EOVERFLOW, the kernel
    /// being short of memory): re-read the state of every subscribed object. The
    /// channel stays usable; the events after the loss follow.
    events_lost,
    /// The peer rejected the connection (RDMA_CM_EVENT_REJECTED), e.g. nobody
    /// listens on that port.
    connection_rejected,
    /// The peer did not answer the connection request (RDMA_CM_EVENT_UNREACHABLE).
    peer_unreachable,
    /// Address resolution failed (RDMA_CM_EVENT_ADDR_ERROR); from async_connect,
    /// also rdma_resolve_addr(3) failing at once (ENETUNREACH, ...): no RDMA
    /// device's network reaches the address.
    address_error,
    /// Route resolution failed (RDMA_CM_EVENT_ROUTE_ERROR); from async_connect,
    /// whatever the route's step failed with, its timeout included.
    route_error,
    /// Establishing the connection failed (RDMA_CM_EVENT_CONNECT_ERROR).
    connect_error,
    /// The connection was disconnected (RDMA_CM_EVENT_DISCONNECTED).
    disconnected,
    /// An rdma_cm event the step did not expect.
    unexpected_cm_event,
    /// The completion queue is in use the other way: its completions go to
    /// queue_pair operations, so async_poll and async_wait are refused on it; or
    /// its owner polls it, so no queue_pair can take its completions.
    completion_queue_in_use,
    /// The device reported the queue pair broken (IBV_EVENT_QP_FATAL): its work
    /// requests end, the QP is in the error state.
    queue_pair_fatal,
    /// The device found a work request of the queue pair invalid
    /// (IBV_EVENT_QP_REQ_ERR, a local work queue error); the QP is in the error
    /// state.
    queue_pair_request_error,
    /// The device found an access violation on the queue pair
    /// (IBV_EVENT_QP_ACCESS_ERR, a local access error, e.g. a peer writing where
    /// it may not); the QP is in the error state.
    queue_pair_access_error,
    /// The completion queue overran (IBV_EVENT_CQ_ERR): completions were lost, so
    /// the work requests whose completions go there end without them.
    completion_queue_overrun,
    /// An atomic operation (async_fetch_add, async_compare_swap) refused before it
    /// was posted: its remote address or its result buffer is not 8-byte aligned,
    /// or the result buffer is shorter than 8 bytes (ibv_post_send(3): atomics
    /// act on 64 bits at an aligned address).
    misaligned_atomic,
    /// A work request refused because the queue pair is not connected yet: the
    /// device refused the post (EINVAL) and the QP is in the RESET state, or, for
    /// a send, RDMA or atomic operation, in INIT or RTR (ibv_post_send(3) needs
    /// RTS, ibv_post_recv(3) INIT or later). Connect it first (rdma_cm, or
    /// ibv_modify_qp(3) through INIT, RTR and RTS).
    queue_pair_not_connected,
    /// async_receive on a queue pair made on a shared receive queue: its messages
    /// complete the shared_receive_queue's async_receive instead.
    receive_on_shared_queue,
    /// async_connect: resolving the address timed out (rdma_resolve_addr(3)'s
    /// ETIMEDOUT): no host answered for it on the RDMA device's network within
    /// connect_options::resolve_timeout.
    address_timeout,
    /// async_connect: the peer did not answer the connection request
    /// (rdma_connect(3), RDMA_CM_EVENT_UNREACHABLE or ETIMEDOUT after rdma_cm's
    /// retries).
    connect_timeout,
    /// Registering memory failed (ibv_reg_mr(3): ENOMEM) while the process's
    /// locked-memory limit (RLIMIT_MEMLOCK, `ulimit -l`) is finite: the pages it
    /// would pin pass the limit. A stream's accept or connect reports it when its
    /// memory cannot be registered. Raise the limit (`ulimit -l`, systemd's
    /// LimitMEMLOCK), or give streams smaller rings (stream_options).
    locked_memory_limit,
};

/// The category of rdma_asio::errc; its name() is "rdma_asio".
const error_category& get_error_category() noexcept;

inline error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), get_error_category()};
}

} // namespace rdma_asio

RDMA_ASIO_DETAIL_ERROR_CODE_ENUM(rdma_asio::errc);
