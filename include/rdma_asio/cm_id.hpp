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

#include <chrono>
#include <memory>
#include <system_error>

namespace rdma_asio {

/// An rdma_cm_id on a cm_event_channel. Each connection step calls its librdmacm
/// function and completes when the id's answering event arrives: with an empty
/// error for the event the step waits for, else with error_of(event, expected)
/// (connection_rejected, peer_unreachable, address_error, route_error,
/// connect_error, disconnected, device_removed, ETIMEDOUT, ...). A failing call
/// completes the step with its errno at once (never inside the initiating call).
///
/// Every step: signature void(std::error_code) unless said otherwise; every
/// completion token; per-operation cancellation terminal, partial and total: the
/// wait ends with operation_aborted, the librdmacm call already made is not
/// undone, and its event stays for the id's next wait (async_next).
///
/// Destruction (or close()) destroys the QP created on the id (rdma_destroy_qp),
/// acks the id's unclaimed events, rejects connection requests nobody took, and
/// destroys the id. Move-only; a default-constructed id is not open.
class cm_id {
public:
    using executor_type = asio::any_io_executor;

    cm_id() noexcept = default;
    /// rdma_create_id on `channel`; throws std::system_error naming the call.
    explicit cm_id(cm_event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);

    cm_id(cm_id&& other) noexcept;
    cm_id& operator=(cm_id&& other) noexcept;
    cm_id(const cm_id&) = delete;
    cm_id& operator=(const cm_id&) = delete;
    ~cm_id() { close(); }

    executor_type get_executor() const noexcept { return ex_; }
    rdma_cm_id* native_handle() const noexcept { return id_; }
    bool is_open() const noexcept { return id_ != nullptr; }

    /// rdma_bind_addr, rdma_listen (backlog 0: librdmacm's default).
    void bind(const sockaddr* addr);
    void listen(int backlog = 0);
    /// The port the id is bound to (host byte order), e.g. after binding port 0.
    std::uint16_t local_port() const noexcept;

    /// rdma_resolve_addr, then ADDR_RESOLVED. `src` may be nullptr.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_resolve_addr(
        const sockaddr* src, const sockaddr* dst, std::chrono::milliseconds timeout,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::resolve_addr(src, dst, timeout), RDMA_CM_EVENT_ADDR_RESOLVED,
                    std::forward<CompletionToken>(token));
    }
    /// rdma_resolve_route, then ROUTE_RESOLVED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_resolve_route(
        std::chrono::milliseconds timeout,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::resolve_route(timeout), RDMA_CM_EVENT_ROUTE_RESOLVED,
                    std::forward<CompletionToken>(token));
    }
    /// rdma_connect, then ESTABLISHED. Create the QP (rdma_create_qp) first.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_connect(const rdma_conn_param& param,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::connect(param), RDMA_CM_EVENT_ESTABLISHED,
                    std::forward<CompletionToken>(token));
    }
    /// On an id from async_get_request: rdma_accept, then ESTABLISHED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(const rdma_conn_param& param,
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::accept(param), RDMA_CM_EVENT_ESTABLISHED,
                    std::forward<CompletionToken>(token));
    }
    /// rdma_disconnect, then DISCONNECTED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_disconnect(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::disconnect(), RDMA_CM_EVENT_DISCONNECTED,
                    std::forward<CompletionToken>(token));
    }

    /// On a listening id: the next connection request, as a new id on the same
    /// channel, to accept (create its QP, then async_accept) or reject().
    /// Signature: void(std::error_code, rdma_asio::cm_id). Each request goes to
    /// exactly one wait; requests that arrive while nobody waits are kept.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_get_request(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_compose<CompletionToken, void(std::error_code, cm_id)>(
            detail::cm_request_op<cm_id>{checked_channel(), id_, ex_}, token, ex_);
    }

    /// The next event of this id (e.g. DISCONNECTED from the peer).
    /// Signature: void(std::error_code, rdma_asio::cm_event).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return checked_channel()->dispatcher->async_next(detail::cm_id_match{id_},
                                                         std::forward<CompletionToken>(token));
    }

    /// rdma_reject of a connection request.
    void reject(const void* private_data = nullptr, std::uint8_t length = 0);
    /// Completes this id's pending waits with operation_aborted.
    void cancel();
    /// See the class comment. Idempotent.
    void close() noexcept;

private:
    template <class>
    friend struct detail::cm_request_op;
    // Adopts the new id of a CONNECT_REQUEST.
    cm_id(std::shared_ptr<detail::cm_channel_impl> channel, rdma_cm_id* id,
          const executor_type& ex) noexcept
        : ex_(ex), channel_(std::move(channel)), id_(id) {}

    const std::shared_ptr<detail::cm_channel_impl>& checked_channel() const;

    template <class CompletionToken>
    auto step(detail::cm_call call, rdma_cm_event_type expected, CompletionToken&& token) {
        return asio::async_compose<CompletionToken, void(std::error_code)>(
            detail::cm_step_op{checked_channel(), id_, call, expected, false, {}}, token, ex_);
    }

    executor_type ex_;
    std::shared_ptr<detail::cm_channel_impl> channel_;
    rdma_cm_id* id_ = nullptr;
};

} // namespace rdma_asio
