// An acceptor of RC connections, shaped like Asio's ip::tcp::acceptor.
#pragma once

#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/accept_op.hpp"
#include "rdma_asio/detail/cm/acceptor_impl.hpp"
#include "rdma_asio/detail/cm/tcp_endpoint.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rdma_asio {

/// What an acceptor's connections are made with.
struct acceptor_options {
    /// The queues of each connection, as for connection's constructors.
    connection_options connection{};
    /// The connection requests that may wait for an accept: beyond them a
    /// request is rejected at once, and its connect ends with
    /// errc::connection_rejected. 0 (or more than the kernel's
    /// net.rdma_ucm.max_backlog, 1024 by default) takes that maximum. (The
    /// kernel is asked for its maximum in rdma_listen(3), so that a burst is not
    /// dropped before the acceptor reads it: a dropped request is retried by the
    /// peer for a minute or more.)
    int backlog = 0;
    /// Decides on each connection request before anything is made for it, from
    /// the private data the peer sent with rdma_connect(3) (for RC over
    /// InfiniBand and RoCE, 56 bytes: what the peer did not send is zero). True
    /// accepts it; false rejects it (rdma_reject(3)) with `reply` as the
    /// rejection's private data (at most 148 bytes reach the peer; more is an
    /// error the accept ignores), and the accept goes on to the next request.
    /// Runs on the accept's handler's executor. Empty: every request is accepted.
    std::function<bool(std::span<const std::uint8_t> request, std::vector<std::uint8_t>& reply)>
        screen;
};

template <class Executor = asio::any_io_executor>
class basic_acceptor;
template <class Executor>
class basic_stream; // <rdma_asio/stream.hpp>

namespace detail {
// Defined in <rdma_asio/stream.hpp>: an accept into a stream.
template <class Executor, class Token>
auto accept_stream(basic_acceptor<Executor>& acceptor, basic_stream<Executor>& stream,
                   Token&& token);
} // namespace detail

/// An acceptor on the default executor type, as Asio's ip::tcp::acceptor.
using acceptor = basic_acceptor<>;

/// Listens for RC connections with rdma_cm (rdma_bind_addr(3), rdma_listen(3))
/// on an IP address and port, and hands each one over ready: async_accept
/// completes with a connection that is established (rdma_accept(3) with the
/// parameters default_conn_param chooses, then ESTABLISHED), whose QP and CQs
/// were made with acceptor_options::connection.
///
/// The acceptor keeps one protection domain and one completion channel for
/// each device its requests arrive on, made with the first request from that
/// device; its connections on that device share them (register memory once,
/// with connection::pd(), for all of them). Each connection keeps its share:
/// the acceptor may be closed or destroyed before its connections. Memory
/// registered there with remote access is reachable by every peer of the
/// acceptor that has its key (the device checks a remote key against the
/// protection domain, not the connection). A stream accepted from it is made in a
/// protection domain of its own.
///
/// Errors that concern one request only (the peer went away, the connection
/// could not be made, the handshake timed out) complete that accept with the
/// error and leave the acceptor listening: accept again. operation_aborted
/// means cancel() or close() (or the operation's cancellation slot);
/// bad_descriptor that the acceptor is not open.
///
/// Per-operation cancellation: terminal and partial. While the accept waits
/// for a request, it takes none (the request stays for the next accept); once
/// it has taken one, that connection is closed, and the peer's connect fails.
/// cancel() does the same for every accept in flight.
///
/// Move-only, also into an acceptor of another executor type to which this
/// one's converts (asio::as_default_on); a moved-from acceptor is closed. One
/// object may not be used from several threads at once (as Asio's objects);
/// accepts in flight may complete on any thread their handlers' executors run.
template <class Executor>
class basic_acceptor : public detail::io_object<basic_acceptor, Executor, detail::acceptor_impl> {
    using base = detail::io_object<basic_acceptor, Executor, detail::acceptor_impl>;

public:
    using typename base::executor_type;
    /// The listening rdma_cm_id (owned by the acceptor).
    using typename base::native_handle_type;
    /// The address type: rdma_cm's RC port space is TCP's.
    using endpoint_type = asio::ip::tcp::endpoint;
    using connection_type = basic_connection<Executor>;

    /// An acceptor that is not open (see listen()).
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_acceptor(const detail::executor_or_context<Executor>& ex) noexcept : base(ex) {}

    /// Listens on `endpoint` (see listen()); throws system_error.
    basic_acceptor(const detail::executor_or_context<Executor>& ex, const endpoint_type& endpoint,
                   const acceptor_options& options = {})
        : base(ex) {
        listen(endpoint, options);
    }

    using base::base;
    using base::operator=;

    /// Makes an event channel and an id, binds it to `endpoint` (an address of an
    /// RDMA device's netdev, or the unspecified address for every address of
    /// every RDMA device; port 0 for one the system chooses: see
    /// local_endpoint()) and listens. A loopback address (127.0.0.0/8, ::1) is
    /// refused with EADDRNOTAVAIL before anything is made: RDMA devices have no
    /// loopback, and rdma_cm would listen on the devices' own addresses, for the
    /// network. Errors: asio::error::already_open; EADDRNOTAVAIL for a loopback
    /// address; the errno of rdma_create_event_channel, rdma_create_id,
    /// rdma_bind_addr (EADDRINUSE: the port is taken; EADDRNOTAVAIL: no RDMA
    /// device has that address) or rdma_listen.
    void listen(const endpoint_type& endpoint, const acceptor_options& options, error_code& ec) {
        const char* failed = nullptr;
        listen(endpoint, options, ec, failed);
    }
    void listen(const endpoint_type& endpoint, error_code& ec) { listen(endpoint, {}, ec); }
    /// The same; throws system_error naming the endpoint, the call that failed
    /// (or that the address is a loopback one, and what to listen on instead)
    /// and, for EADDRNOTAVAIL and EADDRINUSE, the likely cause.
    void listen(const endpoint_type& endpoint, const acceptor_options& options = {}) {
        const char* failed = nullptr;
        error_code ec;
        listen(endpoint, options, ec, failed);
        if (ec)
            detail::throw_error(ec, detail::listen_failure(endpoint, failed, ec).c_str());
    }

    /// The address and port the acceptor listens on. Errors: bad_descriptor
    /// when not open.
    endpoint_type local_endpoint(error_code& ec) const {
        sockaddr_storage address{};
        const auto& state = detail::io_object_access::state(*this);
        if (!state || !state->local_address(address)) {
            ec = asio::error::bad_descriptor;
            return {};
        }
        endpoint_type endpoint;
        if (!detail::tcp_endpoint_of(reinterpret_cast<const sockaddr*>(&address), endpoint)) {
            ec = asio::error::address_family_not_supported;
            return {};
        }
        ec.clear();
        return endpoint;
    }
    /// The same; throws system_error naming the call.
    endpoint_type local_endpoint() const {
        error_code ec;
        endpoint_type endpoint = local_endpoint(ec);
        detail::throw_if_error(ec, "rdma_asio::acceptor::local_endpoint: the acceptor is not open");
        return endpoint;
    }

    /// The next connection, established. Signature:
    /// void(error_code, basic_connection<Executor>); on error the connection is
    /// not open. The connection's executor is the acceptor's. See the class
    /// comment for errors and cancellation.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_accept(detail::no_preparation{}, std::forward<CompletionToken>(token));
    }
    /// The same, calling `prepare(conn)` with the connection made for the
    /// request before it is accepted (rdma_accept(3)): start its first receives
    /// there (conn.queue_pair().async_receive), so that the peer's first message
    /// finds one. A message that arrives before a receive is posted waits for the
    /// RNR timer: 655 ms with the one rdma_cm sets. `prepare` runs within the
    /// operation, on its handler's executor, once for each request the screen
    /// admitted and the device could serve; should the accept then fail, the
    /// connection is closed and the operations `prepare` started end with
    /// operation_aborted. `prepare` is moved into the operation.
    /// With g++ 12, name a lambda that captures by value before the co_await
    /// rather than write it inside the co_await expression: g++ 12 destroys such
    /// a temporary twice (a shared_ptr it holds is released once too often).
    template <detail::preparation<basic_connection<Executor>> Prepare,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(Prepare prepare,
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this
            ->template initiate<void(error_code, connection_type), detail::accept_start<Executor>>(
                "rdma_asio::acceptor::async_accept", std::forward<CompletionToken>(token),
                this->get_executor(), std::move(prepare));
    }

    /// Accepts the next connection into `stream`, as
    /// rdma_asio::async_accept(acceptor, stream, token) does (<rdma_asio/stream.hpp>):
    /// the shape of a TCP acceptor's async_accept(socket, token).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_accept(basic_stream<Executor>& stream,
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return detail::accept_stream(*this, stream, std::forward<CompletionToken>(token));
    }

    // cancel(): every accept in flight ends with operation_aborted (see the
    // class comment). close(): cancel(), then the listening id goes (requests
    // nobody took are rejected). Idempotent.

private:
    // `failed`: the call that failed, if any.
    void listen(const endpoint_type& endpoint, const acceptor_options& options, error_code& ec,
                const char*& failed) {
        this->open_with(ec, [&](const auto& ex, error_code& e) {
            return detail::acceptor_impl::open(ex, endpoint.data(), options.backlog,
                                               options.connection, options.screen, e, failed);
        });
    }
};

} // namespace rdma_asio
