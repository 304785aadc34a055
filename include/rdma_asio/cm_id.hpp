// An rdma_cm identifier (rdma_create_id) whose connection steps are Asio
// operations.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/cm/cm_id_impl.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <rdma/rdma_cma.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_cm_id;

/// An rdma_cm_id on a cm_event_channel. Each connection step calls its librdmacm
/// function and completes when the id's answering event arrives: with an empty
/// error for the event the step waits for, else with error_of(event, expected)
/// (connection_rejected, peer_unreachable, address_error, route_error,
/// connect_error, disconnected, device_removed, ETIMEDOUT, ...). A failing call
/// completes the step with its errno at once (never inside the initiating call).
///
/// Bad input, as Asio does it: an operation on an id that is not open (closed,
/// moved-from, default-constructed) completes with asio::error::bad_descriptor,
/// posted (the initiating call throws system_error only when there is no
/// executor at all to run the handler on: a default-constructed id and a handler
/// without an associated executor). A step that needs the id's device
/// (async_resolve_route, async_connect, async_accept, async_disconnect) on an id
/// that has none yet (address not resolved, not bound to a device's address)
/// completes with ENODEV; a bad address with EINVAL (null) or EAFNOSUPPORT (a
/// family rdma_cm does not know: anything but AF_INET, AF_INET6, AF_IB); private
/// data given as a null pointer with a non-zero length with EINVAL. The
/// synchronous calls throw system_error naming the call for the same cases
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
///
/// `Executor` is the type of the executor handlers run on by default; cm_id uses
/// asio::any_io_executor, and rebind_executor (or asio::as_default_on) gives the
/// same id with another executor type or a default completion token. An id made
/// on a channel takes the channel's executor unless given its own; an id from
/// async_get_request has its listener's.
template <class Executor>
class basic_cm_id : public detail::io_object<basic_cm_id, Executor, detail::cm_id_impl> {
    using base = detail::io_object<basic_cm_id, Executor, detail::cm_id_impl>;
    using impl_type = detail::cm_id_impl;

public:
    using typename base::executor_type;
    /// The rdma_cm_id (owned by the object).
    using typename base::native_handle_type;

    /// An id that is not open, without an executor (e.g. to move one into).
    basic_cm_id() noexcept requires std::default_initializable<Executor> : base(Executor()) {}
    /// An id that is not open yet (see open()).
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_cm_id(const detail::executor_or_context<Executor>& ex) noexcept : base(ex) {}

    /// rdma_create_id on `channel`, with the channel's executor; throws
    /// system_error naming the call (EBADF for a channel that is not open).
    template <class Executor1>
    requires std::is_convertible_v<const Executor1&, Executor>
    explicit basic_cm_id(basic_cm_event_channel<Executor1>& channel,
                         rdma_port_space ps = RDMA_PS_TCP)
        : base(channel.get_executor()) {
        open(channel, ps);
    }
    /// The same with an executor of the id's own.
    template <class Executor1>
    basic_cm_id(const detail::executor_or_context<Executor>& ex,
                basic_cm_event_channel<Executor1>& channel, rdma_port_space ps = RDMA_PS_TCP)
        : base(ex) {
        open(channel, ps);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the id (see the class comment).
    using base::base;
    using base::operator=;

    /// rdma_create_id on `channel` (of any executor type); the id keeps its own
    /// executor. Errors: asio::error::already_open; bad_descriptor for a channel
    /// that is not open; the call's errno.
    template <class Executor1>
    void open(basic_cm_event_channel<Executor1>& channel, rdma_port_space ps, error_code& ec) {
        this->open_with(
            ec, [&](error_code& e) { return detail::open_cm_id(this->state_of(channel), ps, e); });
    }
    template <class Executor1>
    void open(basic_cm_event_channel<Executor1>& channel, error_code& ec) {
        open(channel, RDMA_PS_TCP, ec);
    }
    /// The same; throws system_error naming rdma_create_id.
    template <class Executor1>
    void open(basic_cm_event_channel<Executor1>& channel, rdma_port_space ps = RDMA_PS_TCP) {
        error_code ec;
        open(channel, ps, ec);
        detail::throw_if_error(ec, ec == asio::error::bad_descriptor
                                       ? "rdma_create_id: the cm_event_channel is not open"
                                       : "rdma_create_id");
    }

    /// rdma_bind_addr. Throws system_error naming the call: EBADF (not
    /// open), EINVAL (null address), EAFNOSUPPORT (not AF_INET, AF_INET6, AF_IB),
    /// or the call's errno.
    void bind(const sockaddr* addr) {
        detail::throw_if_error(checked("rdma_bind_addr: the cm_id is not open").bind(addr),
                               "rdma_bind_addr");
    }
    /// rdma_listen (backlog 0: the kernel's maximum, net.rdma_ucm.max_backlog).
    /// At most `backlog` requests read from the channel wait for
    /// async_get_request; a request beyond them is rejected (the kernel counts
    /// only those not read yet, and the channel is read whenever one of its ids
    /// waits). Throws system_error naming the call: EBADF (not open) or the
    /// call's errno.
    void listen(int backlog = 0) {
        detail::throw_if_error(checked("rdma_listen: the cm_id is not open").listen(backlog),
                               "rdma_listen");
    }
    /// The port the id is bound to (host byte order), e.g. after binding port 0;
    /// 0 when not open.
    std::uint16_t local_port() const noexcept {
        return this->impl_ ? this->impl_->local_port() : 0;
    }

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
    /// The same with the parameters default_conn_param gives, chosen from the
    /// id's device when the operation is launched.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    requires(!std::is_convertible_v<CompletionToken, const rdma_conn_param&>) auto async_connect(
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::connect_with_defaults(), RDMA_CM_EVENT_ESTABLISHED,
                    "rdma_asio::cm_id::async_connect", std::forward<CompletionToken>(token));
    }
    /// On an id from async_get_request: rdma_accept, then ESTABLISHED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(const rdma_conn_param& param,
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::accept(param), RDMA_CM_EVENT_ESTABLISHED,
                    "rdma_asio::cm_id::async_accept", std::forward<CompletionToken>(token));
    }
    /// The same with the parameters default_conn_param gives: within the
    /// device's limits and the request's.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    requires(!std::is_convertible_v<CompletionToken, const rdma_conn_param&>) auto async_accept(
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::accept_with_defaults(
                        this->impl_ ? this->impl_->request_limits() : std::nullopt),
                    RDMA_CM_EVENT_ESTABLISHED, "rdma_asio::cm_id::async_accept",
                    std::forward<CompletionToken>(token));
    }
    /// rdma_disconnect, then DISCONNECTED.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_disconnect(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return step(detail::cm_call::disconnect(), RDMA_CM_EVENT_DISCONNECTED,
                    "rdma_asio::cm_id::async_disconnect", std::forward<CompletionToken>(token));
    }

    /// On an id of the UDP port space (RDMA_PS_UDP) bound to a local address
    /// (bind() or async_resolve_addr): joins the multicast group `group` (an
    /// IPv4 or IPv6 multicast address) with rdma_join_multicast(3), then waits
    /// for MULTICAST_JOIN. Signature: void(error_code, rdma_asio::datagram_endpoint
    /// group): the endpoint to send the group's datagrams to, and to give
    /// datagram_queue_pair::attach_multicast so that a queue pair receives them
    /// (this id has no QP of its own, and librdmacm attaches none). Errors:
    /// EINVAL or EAFNOSUPPORT for a bad address (EINVAL for an IPv4 or IPv6
    /// address that is not a multicast group); ENODEV before the id is bound;
    /// the errno of rdma_join_multicast (EINVAL on an id of another port space);
    /// a MULTICAST_ERROR's status. Cancellation as for the connection steps.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_join_multicast(
        const sockaddr* group,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        // The group is left by close() if still joined: the id remembers it as
        // the operation is launched (remember_group), so that one never launched changes
        // nothing.
        return this->template initiate_on<void(error_code, datagram_endpoint),
                                          detail::cm_start<void(error_code, datagram_endpoint)>>(
            channel(), "rdma_asio::cm_id::async_join_multicast",
            std::forward<CompletionToken>(token),
            detail::cm_step<detail::read_multicast_group, detail::remember_group>{
                {this->impl_},
                detail::cm_call::join_multicast(group),
                RDMA_CM_EVENT_MULTICAST_JOIN,
                {detail::group_address(group)}});
    }
    /// Leaves a group joined with async_join_multicast (rdma_leave_multicast(3));
    /// detach the queue pairs first. close() leaves the groups still joined. Errors: bad_descriptor
    /// when not open; EINVAL or EAFNOSUPPORT for a bad address; the errno of rdma_leave_multicast
    /// (EADDRNOTAVAIL for a group not joined).
    void leave_multicast(const sockaddr* group, error_code& ec) {
        ec = this->is_open() ? this->impl_->leave_group(group)
                             : error_code(asio::error::bad_descriptor);
    }
    void leave_multicast(const sockaddr* group) {
        error_code ec;
        leave_multicast(group, ec);
        detail::throw_if_error(ec, "rdma_asio::cm_id::leave_multicast: rdma_leave_multicast");
    }

    /// On a listening id: the next connection request, as a new id on the same
    /// channel, to accept (create its QP, then async_accept) or reject().
    /// Signature: void(error_code, basic_cm_id) (a cm_id for a cm_id). Each request goes to
    /// exactly one wait; requests that arrive while nobody waits are kept, and a
    /// request taken by a wait cancelled before its handler ran goes back to the
    /// front for the next wait. Closing the listener meanwhile rejects it.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_get_request(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate_on<void(error_code, basic_cm_id),
                                          detail::cm_start<void(error_code, basic_cm_id)>>(
            channel(), "rdma_asio::cm_id::async_get_request", std::forward<CompletionToken>(token),
            detail::cm_request<adopt_request>{{this->impl_}, {this->ex_}});
    }

    /// The next event of this id (e.g. DISCONNECTED from the peer).
    /// Signature: void(error_code, rdma_asio::cm_event). Do not keep the
    /// event beyond the id: destroying the id waits until it is acked.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate_on<void(error_code, cm_event),
                                          detail::cm_start<void(error_code, cm_event)>>(
            channel(), "rdma_asio::cm_id::async_next", std::forward<CompletionToken>(token),
            detail::cm_id_next{{this->impl_}});
    }

    /// On an id from async_get_request: a copy of its CONNECT_REQUEST's private
    /// data (rdma_conn_param's private_data, or the UD one), kept because the
    /// request's event is acknowledged, and librdmacm's copy freed, before the
    /// handler runs. Its length is what the transport delivers, which may be more
    /// than the peer sent (the rest zero: 56 bytes for RC over InfiniBand and
    /// RoCE): put a length or a marker into the data itself. Empty for every
    /// other id (and after close()).
    std::span<const std::uint8_t> private_data() const noexcept {
        return this->impl_ ? this->impl_->private_data() : std::span<const std::uint8_t>{};
    }

    /// rdma_reject of a connection request. Throws system_error naming the
    /// call: EBADF (not open), EINVAL (null private_data with a non-zero length),
    /// or the call's errno.
    void reject(const void* private_data = nullptr, std::uint8_t length = 0) {
        error_code ec = checked("rdma_reject: the cm_id is not open").reject(private_data, length);
        detail::throw_if_error(ec, ec == asio::error::invalid_argument && private_data == nullptr
                                       ? "rdma_reject: null private data with a non-zero length"
                                       : "rdma_reject");
    }

    // cancel(): completes this id's pending waits with operation_aborted. Does
    // nothing when not open. close(): see the class comment. Idempotent.

private:
    // Makes the id of a connection request: it has the listener's executor.
    struct adopt_request {
        Executor ex;
        basic_cm_id operator()(std::shared_ptr<impl_type> impl) const {
            basic_cm_id id(ex);
            id.adopt(std::move(impl));
            return id;
        }
    };

    // Null when not open: the operation then completes with bad_descriptor.
    std::shared_ptr<detail::cm_channel_impl> channel() const {
        return this->impl_ ? this->impl_->channel() : nullptr;
    }

    template <class CompletionToken>
    auto step(detail::cm_call call, rdma_cm_event_type expected, const char* what,
              CompletionToken&& token) {
        return this->template initiate_on<void(error_code), detail::cm_start<void(error_code)>>(
            channel(), what, std::forward<CompletionToken>(token),
            detail::cm_step<>{{this->impl_}, call, expected, {}});
    }

    using base::checked;
};

/// An id on any I/O executor.
using cm_id = basic_cm_id<>;

/// The rdma_conn_param rdma_asio chooses for `id` from its device's limits
/// (ibv_query_device(3)): for an id from async_get_request, the parameters of
/// rdma_accept(3), within the request's; for any other, those of rdma_connect(3).
/// responder_resources and initiator_depth as large as the device (and the
/// request) allow, retry_count 7, rnr_retry_count 7 (retry for ever while the
/// peer has no receive posted), no private data: set private_data and
/// private_data_len on the copy to send some. The id must have its device
/// (after async_resolve_addr, or from async_get_request). Errors:
/// bad_descriptor (the id is not open), no_such_device (no device yet), the
/// errno of ibv_query_device.
template <class Executor>
rdma_conn_param default_conn_param(const basic_cm_id<Executor>& id, error_code& ec) noexcept {
    rdma_conn_param param{};
    const auto& state = detail::io_object_access::state(id);
    if (!state) {
        ec = asio::error::bad_descriptor;
        return param;
    }
    ec = detail::default_conn_param(state->native_handle(), state->request_limits(), param);
    return param;
}
/// The same; throws system_error naming rdma_asio::default_conn_param.
template <class Executor>
rdma_conn_param default_conn_param(const basic_cm_id<Executor>& id) {
    error_code ec;
    rdma_conn_param param = default_conn_param(id, ec);
    detail::throw_if_error(ec, "rdma_asio::default_conn_param");
    return param;
}

} // namespace rdma_asio
