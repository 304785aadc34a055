// An rdma_cm identifier (rdma_create_id) whose connection steps are Asio
// operations.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/detail/cm_steps.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/compose.hpp>

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

namespace rdma_asio {

/// An rdma_cm_id on a cm_event_channel. Each connection step calls its librdmacm
/// function and completes when the id's answering event arrives: with an empty
/// error for the event the step waits for, else with error_of(event, expected)
/// (connection_rejected, peer_unreachable, address_error, route_error,
/// connect_error, disconnected, device_removed, ETIMEDOUT, ...). A failing call
/// completes the step with its errno at once (never inside the initiating call).
///
/// Bad input, as Asio does it: an operation on an id that is not open (closed,
/// moved-from, default-constructed) completes with asio::error::bad_descriptor,
/// posted (the initiating call throws std::system_error only when there is no
/// executor at all to run the handler on: a default-constructed id and a handler
/// without an associated executor). A step that needs the id's device
/// (async_resolve_route, async_connect, async_accept, async_disconnect) on an id
/// that has none yet (address not resolved, not bound to a device's address)
/// completes with ENODEV; a bad address with EINVAL (null) or EAFNOSUPPORT (a
/// family rdma_cm does not know: anything but AF_INET, AF_INET6, AF_IB); private
/// data given as a null pointer with a non-zero length with EINVAL. The
/// synchronous calls throw std::system_error naming the call for the same cases
/// (EBADF for an id that is not open).
///
/// Every operation takes every completion token. Per-operation cancellation
/// (docs/cancellation.md): the steps (async_resolve_addr, async_resolve_route,
/// async_connect, async_accept, async_disconnect) honour terminal and partial,
/// not total: their librdmacm call is made as they start and is not undone, so a
/// cancelled step ends its wait only, and its answering event stays for the id's
/// next wait (async_next), which tells what became of the call; a total-only
/// signal is ignored. async_get_request and async_next make no call and honour
/// terminal, partial and total. Cancelled before its event arrived, an operation
/// ends with operation_aborted and takes nothing. Cancelled after it took its
/// event (the event arrived, the handler has not run yet): the event is handed
/// back, the next wait of the id gets it first, and the operation completes
/// with operation_aborted, so `op || timer` loses no event, no connection
/// request. cancel() ends only the waits that have not taken an event (as
/// Asio's cancel() does for operations already complete).
///
/// Destruction (or close()) destroys the QP created on the id (rdma_destroy_qp),
/// acks the id's unclaimed events (also those taken by operations whose handlers
/// have not run yet, which then complete with operation_aborted), rejects
/// connection requests nobody took, and destroys the id. It never waits for an
/// executor. Move-only; a default-constructed id is not open.
class cm_id {
public:
    using executor_type = asio::any_io_executor;

    cm_id() noexcept = default;
    /// rdma_create_id on `channel`; throws std::system_error naming the call
    /// (EBADF for a moved-from channel).
    explicit cm_id(cm_event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);

    cm_id(cm_id&& other) noexcept;
    cm_id& operator=(cm_id&& other) noexcept;
    cm_id(const cm_id&) = delete;
    cm_id& operator=(const cm_id&) = delete;
    ~cm_id() { close(); }

    executor_type get_executor() const noexcept { return ex_; }
    rdma_cm_id* native_handle() const noexcept { return id_; }
    bool is_open() const noexcept { return id_ != nullptr; }

    /// rdma_bind_addr. Throws std::system_error naming the call: EBADF (not
    /// open), EINVAL (null address), EAFNOSUPPORT (not AF_INET, AF_INET6, AF_IB),
    /// or the call's errno.
    void bind(const sockaddr* addr);
    /// rdma_listen (backlog 0: librdmacm's default). Throws std::system_error
    /// naming the call: EBADF (not open) or the call's errno.
    void listen(int backlog = 0);
    /// The port the id is bound to (host byte order), e.g. after binding port 0;
    /// 0 when not open.
    std::uint16_t local_port() const noexcept;

    /// rdma_resolve_addr, then ADDR_RESOLVED. `src` may be nullptr; `dst` must be
    /// an address (see the class comment for the errors).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_resolve_addr(
        const sockaddr* src, const sockaddr* dst, std::chrono::milliseconds timeout,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::resolve_addr(src, dst, timeout), RDMA_CM_EVENT_ADDR_RESOLVED,
                    "rdma_asio::cm_id::async_resolve_addr", std::forward<CompletionToken>(token));
    }
    /// rdma_resolve_route, then ROUTE_RESOLVED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_resolve_route(
        std::chrono::milliseconds timeout,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::resolve_route(timeout), RDMA_CM_EVENT_ROUTE_RESOLVED,
                    "rdma_asio::cm_id::async_resolve_route", std::forward<CompletionToken>(token));
    }
    /// rdma_connect, then ESTABLISHED. Create the QP (rdma_create_qp) first.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_connect(const rdma_conn_param& param,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::connect(param), RDMA_CM_EVENT_ESTABLISHED,
                    "rdma_asio::cm_id::async_connect", std::forward<CompletionToken>(token));
    }
    /// On an id from async_get_request: rdma_accept, then ESTABLISHED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(const rdma_conn_param& param,
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::accept(param), RDMA_CM_EVENT_ESTABLISHED,
                    "rdma_asio::cm_id::async_accept", std::forward<CompletionToken>(token));
    }
    /// rdma_disconnect, then DISCONNECTED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_disconnect(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::disconnect(), RDMA_CM_EVENT_DISCONNECTED,
                    "rdma_asio::cm_id::async_disconnect", std::forward<CompletionToken>(token));
    }

    /// On a listening id: the next connection request, as a new id on the same
    /// channel, to accept (create its QP, then async_accept) or reject().
    /// Signature: void(std::error_code, rdma_asio::cm_id). Each request goes to
    /// exactly one wait; requests that arrive while nobody waits are kept, and a
    /// request taken by a wait cancelled before its handler ran goes back to the
    /// front for the next wait. Closing the listener meanwhile rejects it.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_get_request(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return detail::async_cm<void(std::error_code, cm_id)>(
            channel_, ex_, "rdma_asio::cm_id::async_get_request", detail::cm_request<cm_id>{id_},
            std::forward<CompletionToken>(token));
    }

    /// The next event of this id (e.g. DISCONNECTED from the peer).
    /// Signature: void(std::error_code, rdma_asio::cm_event). Do not keep the
    /// event beyond the id: destroying the id waits until it is acked.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return detail::async_cm<void(std::error_code, cm_event)>(
            channel_, ex_, "rdma_asio::cm_id::async_next",
            detail::cm_next<detail::cm_id_match>{{id_}}, std::forward<CompletionToken>(token));
    }

    /// On an id from async_get_request: a copy of its CONNECT_REQUEST's private
    /// data (rdma_conn_param's private_data, or the UD one), kept because the
    /// request's event is acknowledged, and librdmacm's copy freed, before the
    /// handler runs. Its length is what the transport delivers, which may be more
    /// than the peer sent (the rest zero: 56 bytes for RC over InfiniBand and
    /// RoCE): put a length or a marker into the data itself. Empty for every
    /// other id (and after close()).
    std::span<const std::uint8_t> private_data() const noexcept {
        return {private_data_.data(), private_data_length_};
    }

    /// rdma_reject of a connection request. Throws std::system_error naming the
    /// call: EBADF (not open), EINVAL (null private_data with a non-zero length),
    /// or the call's errno.
    void reject(const void* private_data = nullptr, std::uint8_t length = 0);
    /// Completes this id's pending waits with operation_aborted. Does nothing
    /// when not open.
    void cancel();
    /// See the class comment. Idempotent.
    void close() noexcept;

private:
    template <class>
    friend struct detail::cm_request;
    // Adopts the new id of a CONNECT_REQUEST.
    static cm_id adopt(const std::shared_ptr<detail::cm_channel_impl>& channel, rdma_cm_id* id,
                       const executor_type& ex,
                       std::span<const std::uint8_t> private_data) noexcept {
        cm_id adopted;
        adopted.ex_ = ex;
        adopted.channel_ = channel;
        adopted.id_ = id;
        // At most 255 bytes: the length is a uint8_t in librdmacm.
        const std::size_t n = std::min(private_data.size(), adopted.private_data_.size());
        std::copy_n(private_data.begin(), n, adopted.private_data_.begin());
        adopted.private_data_length_ = n;
        return adopted;
    }

    template <class CompletionToken>
    auto step(detail::cm_call call, rdma_cm_event_type expected, const char* what,
              CompletionToken&& token) {
        return detail::async_cm<void(std::error_code)>(channel_, ex_, what,
                                                       detail::cm_step{id_, call, expected},
                                                       std::forward<CompletionToken>(token));
    }

    executor_type ex_;
    std::shared_ptr<detail::cm_channel_impl> channel_;
    rdma_cm_id* id_ = nullptr;
    // Of the CONNECT_REQUEST, for an adopted id (no allocation while adopting).
    std::array<std::uint8_t, 255> private_data_{};
    std::size_t private_data_length_ = 0;
};

} // namespace rdma_asio
