#include "rdma_asio/error.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>

namespace rdma_asio {
namespace {

class error_category_impl final : public error_category {
public:
    const char* name() const noexcept override { return "rdma_asio"; }

    std::string message(int value) const override {
        switch (static_cast<errc>(value)) {
        case errc::no_kernel_support:
            return "the kernel has no RDMA support (no uverbs ABI in sysfs)";
        case errc::no_device:
            return "no RDMA device found (load the device's driver, or add a soft-RoCE device: "
                   "rdma link add rxe0 type rxe netdev IFACE)";
        case errc::device_not_found:
            return "no RDMA device with that name (ibv_devices lists the names)";
        case errc::invalid_port:
            return "port number out of range for this device (ports count from 1)";
        case errc::device_removed:
            return "the RDMA device was removed or failed";
        case errc::no_subnet_manager:
            return "the port has no subnet manager (RoCE port, or no SM has swept the subnet)";
        case errc::sa_request_refused:
            return "the subnet administrator refused the request";
        case errc::malformed_mad:
            return "malformed or truncated MAD";
        case errc::events_lost:
            return "events were lost (EOVERFLOW): re-read the state of every subscribed object";
        case errc::connection_rejected:
            return "the peer rejected the connection (RDMA_CM_EVENT_REJECTED): nobody listens "
                   "on that address and port, or the listener refused (its screen, or its "
                   "backlog of requests not accepted yet was full)";
        case errc::peer_unreachable:
            return "the peer did not answer the connection request "
                   "(RDMA_CM_EVENT_UNREACHABLE)";
        case errc::address_error:
            return "resolving the address failed (rdma_resolve_addr): no RDMA device's "
                   "network reaches it (`ip route get ADDRESS` names the interface the kernel "
                   "would use, `rdma link` the interfaces RDMA devices are on)";
        case errc::route_error:
            return "resolving the route failed (rdma_resolve_route, RDMA_CM_EVENT_ROUTE_ERROR "
                   "or its timeout)";
        case errc::connect_error:
            return "establishing the connection failed (RDMA_CM_EVENT_CONNECT_ERROR)";
        case errc::disconnected:
            return "the connection was disconnected (RDMA_CM_EVENT_DISCONNECTED)";
        case errc::unexpected_cm_event:
            return "an rdma_cm event the operation did not expect";
        case errc::completion_queue_in_use:
            return "the completion queue serves queue_pair operations or its owner's own polls, "
                   "not both (give the queue pairs a completion queue of their own)";
        case errc::queue_pair_fatal:
            return "the device reported the queue pair broken (IBV_EVENT_QP_FATAL)";
        case errc::queue_pair_request_error:
            return "the device found an invalid work request on the queue pair "
                   "(IBV_EVENT_QP_REQ_ERR)";
        case errc::queue_pair_access_error:
            return "the device found an access violation on the queue pair "
                   "(IBV_EVENT_QP_ACCESS_ERR)";
        case errc::completion_queue_overrun:
            return "the completion queue overran and lost completions (IBV_EVENT_CQ_ERR)";
        case errc::misaligned_atomic:
            return "an atomic operation needs an 8-byte aligned remote address and an 8-byte "
                   "aligned result buffer of at least 8 bytes";
        case errc::queue_pair_not_connected:
            return "the queue pair is not connected yet: a send needs its QP in the RTS state, "
                   "a receive in INIT or later (connect it with rdma_cm, or move it with "
                   "ibv_modify_qp)";
        case errc::receive_on_shared_queue:
            return "the queue pair takes its receives from a shared receive queue: call "
                   "async_receive on the shared_receive_queue";
        case errc::address_timeout:
            return "resolving the address timed out (rdma_resolve_addr): no host answered for "
                   "it on the RDMA device's network within connect_options::resolve_timeout "
                   "(no host has that address, or it is down)";
        case errc::connect_timeout:
            return "the peer did not answer the connection request (rdma_connect, "
                   "RDMA_CM_EVENT_UNREACHABLE after rdma_cm's retries): the host at that "
                   "address is down, or has no RDMA device on that network";
        case errc::locked_memory_limit:
            return "registering the memory would pass the process's locked-memory limit "
                   "(ibv_reg_mr failed with ENOMEM under a finite RLIMIT_MEMLOCK): raise the "
                   "limit (ulimit -l, systemd's LimitMEMLOCK) or register less, e.g. streams "
                   "with smaller rings";
        }
        return "unknown rdma_asio error " + std::to_string(value);
    }

    error_condition default_error_condition(int value) const noexcept override {
        switch (static_cast<errc>(value)) {
        case errc::no_kernel_support:
            return detail::generic_errc::function_not_supported;
        case errc::no_device:
        case errc::device_not_found:
            return detail::generic_errc::no_such_device;
        case errc::invalid_port:
            return detail::generic_errc::invalid_argument;
        case errc::device_removed:
            return detail::generic_errc::no_such_device;
        case errc::no_subnet_manager:
            return detail::generic_errc::network_unreachable;
        case errc::sa_request_refused:
            return detail::generic_errc::permission_denied;
        case errc::malformed_mad:
            return detail::generic_errc::bad_message;
        case errc::events_lost:
            return detail::generic_errc::value_too_large; // EOVERFLOW
        case errc::connection_rejected:
            return detail::generic_errc::connection_refused;
        case errc::peer_unreachable:
        case errc::route_error:
            return detail::generic_errc::host_unreachable;
        case errc::address_error:
            return detail::generic_errc::address_not_available;
        case errc::connect_error:
            return detail::generic_errc::connection_aborted;
        case errc::disconnected:
            return detail::generic_errc::not_connected;
        case errc::unexpected_cm_event:
            return detail::generic_errc::protocol_error;
        case errc::completion_queue_in_use:
            return detail::generic_errc::device_or_resource_busy;
        case errc::queue_pair_fatal:
        case errc::queue_pair_request_error:
            return detail::generic_errc::io_error;
        case errc::queue_pair_access_error:
            return detail::generic_errc::permission_denied;
        case errc::completion_queue_overrun:
            return detail::generic_errc::value_too_large;
        case errc::misaligned_atomic:
            return detail::generic_errc::invalid_argument;
        case errc::queue_pair_not_connected:
            return detail::generic_errc::not_connected;
        case errc::receive_on_shared_queue:
            return detail::generic_errc::operation_not_supported;
        case errc::address_timeout:
        case errc::connect_timeout:
            return detail::generic_errc::timed_out;
        case errc::locked_memory_limit:
            return detail::generic_errc::not_enough_memory;
        }
        return {value, *this};
    }
};

} // namespace

const error_category& get_error_category() noexcept {
    static const error_category_impl instance;
    return instance;
}

namespace detail {

error_code errno_code(int e) noexcept {
    return {e, asio::error::get_system_category()};
}

error_code last_errno_code() noexcept {
    // A failed call that forgot errno must still be reported as a failure.
    return errno_code(errno != 0 ? errno : EIO);
}

void throw_error(const error_code& ec, const char* what) {
    throw system_error(ec, what);
}

} // namespace detail
} // namespace rdma_asio
