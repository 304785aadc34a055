// The state of an open cm_id (non-template, see src/cm/cm_id.cpp): the id, the
// channel it shares with the other ids, and the private data of the connection
// request it came from.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/cm/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm/conn_param_defaults.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace rdma_asio::detail {

class cm_id_impl {
public:
    using native_handle_type = rdma_cm_id*;
    static constexpr native_handle_type no_handle = nullptr;

    cm_id_impl(std::shared_ptr<cm_channel_impl> channel, rdma_cm_id* id) noexcept
        : channel_(std::move(channel)), id_(id) {}
    cm_id_impl(const cm_id_impl&) = delete;
    cm_id_impl& operator=(const cm_id_impl&) = delete;
    ~cm_id_impl() { close(); }

    /// The new id of a CONNECT_REQUEST, with a copy of the request's private
    /// data (the event's copy goes with its ack). Null when out of memory: the
    /// request is then rejected and acked.
    static std::shared_ptr<cm_id_impl>
    adopt_request(const std::shared_ptr<cm_channel_impl>& channel, cm_event& request) noexcept;

    native_handle_type native_handle() const noexcept { return id_; }
    const std::shared_ptr<cm_channel_impl>& channel() const noexcept { return channel_; }
    std::span<const std::uint8_t> private_data() const noexcept {
        return {private_data_.data(), private_data_length_};
    }
    /// On the id of an RC connection request: the RDMA reads and atomics the
    /// request asked for, from this side's view (conn_param_defaults.hpp).
    const std::optional<rd_atomic_limits>& request_limits() const noexcept {
        return request_limits_;
    }

    /// rdma_bind_addr, rdma_listen, rdma_reject: the call's error (or a refused
    /// argument), naming nothing; the caller names the call.
    error_code bind(const sockaddr* addr) noexcept;
    error_code listen(int backlog) noexcept { return listen(backlog, backlog); }
    /// rdma_listen with `backlog` for the kernel (the requests not read from
    /// the channel yet), keeping at most `kept` of those read for the next
    /// waiter (cm_event_source.hpp): the rest are rejected.
    error_code listen(int backlog, int kept) noexcept;
    error_code reject(const void* private_data, std::uint8_t length) noexcept;
    std::uint16_t local_port() const noexcept;

    /// The id's pending waits end with operation_aborted.
    void cancel() noexcept;
    /// Destroys the QP and the id, acking (and rejecting) what nobody took (see
    /// cm_id). Idempotent. A queue pair serving the id's QP is closed first
    /// (close_queue_pair_first), so that it never touches a destroyed QP or id.
    void close() noexcept;

    /// Makes close() call `close_queue_pair` before it destroys the QP: the
    /// queue pair that serves it (connection::queue_pair()) lets go of the QP, and
    /// ends its operations, while the id is still there. Replaces an earlier one.
    /// A multicast group this id is joining (async_join_multicast): close()
    /// leaves it, so that rdma_destroy_id finds no membership left (librdmacm
    /// frees a membership's state only in rdma_leave_multicast). Addresses
    /// cm_address_length refuses are not kept.
    void remember_group(const sockaddr* group);
    /// rdma_leave_multicast(3) of `group`, which close() then no longer leaves.
    error_code leave_group(const sockaddr* group) noexcept;

    void close_queue_pair_first(std::function<void()> close_queue_pair) noexcept {
        close_queue_pair_ = std::move(close_queue_pair);
    }

private:
    std::shared_ptr<cm_channel_impl> channel_;
    rdma_cm_id* id_;
    // At most 255 bytes: the length is a uint8_t in librdmacm.
    std::array<std::uint8_t, 255> private_data_{};
    std::size_t private_data_length_ = 0;
    std::optional<rd_atomic_limits> request_limits_;
    std::function<void()> close_queue_pair_;
    std::vector<sockaddr_storage> groups_; // see remember_group
};

/// The group async_join_multicast joins, copied as the operation is made (an
/// operation made with asio::deferred owns its arguments), for the id to
/// remember as it is launched (cm_id_impl::remember_group). `copied` is false
/// for an address refused; the join's call reports it.
struct group_address {
    sockaddr_storage group{};
    bool copied = false;

    explicit group_address(const sockaddr* joined) noexcept;
    const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&group); }
};

/// rdma_create_id on `channel`; null with `ec` set when it fails (bad_descriptor
/// for a null channel: the channel object is not open).
std::shared_ptr<cm_id_impl> open_cm_id(const std::shared_ptr<cm_channel_impl>& channel,
                                       rdma_port_space ps, error_code& ec);

} // namespace rdma_asio::detail
