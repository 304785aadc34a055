// async_connect: for each endpoint in turn (the host name's, resolved with
// Asio's resolver, or the one given), an event channel and an id of its own,
// rdma_resolve_addr, rdma_resolve_route, a protection domain, a completion
// channel and the connection's queues on the device the route goes through,
// then rdma_connect with the library's parameters and ESTABLISHED. An endpoint
// that fails at any step is given up (its id closed) and the next one tried, as
// asio::async_connect does; the last one's error is the operation's, in the value
// of the step it failed in (connect_step_error.hpp). Each failure, with its
// address and step, goes to the options' connect_diagnostics when one is given:
// emptied at the launch, not at the initiation, so that a connect made and never
// launched leaves the program's diagnostics alone.
//
// A program's preparation (async_connect(..., prepare, token)) runs with the
// connection made, before rdma_connect, as an accept's does before rdma_accept.
//
// Cancellation (terminal and partial): the step in progress ends (a librdmacm
// call already made is not undone: closing the id withdraws it), the
// half-made connection is closed, and the operation ends with
// operation_aborted. Asio's resolver does not take a cancellation slot: a
// cancelled host-name lookup ends when the lookup does.
//
// An operation that ends before it has started anything asynchronous (no endpoint
// given, or no channel or id for any of them) posts its end: it never completes
// inside the call that launched it. (Completed there, its handler's work would be
// counted out before the call returned, and an io_context not running would be left
// stopped, so that its next run() returned at once.)
#pragma once

#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/connect_diagnostics.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/accept_op.hpp"
#include "rdma_asio/detail/cm/connect_diagnostics_access.hpp"
#include "rdma_asio/detail/cm/connect_step_error.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace rdma_asio {

/// What async_connect makes a connection with.
struct connect_options {
    /// The connection's queues, as for connection's constructors.
    connection_options connection{};
    /// How long rdma_resolve_addr(3) and rdma_resolve_route(3) may each take.
    std::chrono::milliseconds resolve_timeout{2000};
    /// Where the connect notes each address it tried that failed, the step it
    /// failed in and the error (connect_diagnostics.hpp): none by default. It
    /// must outlive the operation; the connect empties it as it starts.
    connect_diagnostics* diagnostics = nullptr;
    /// Sent with rdma_connect(3), for the listener to read
    /// (acceptor_options::screen, cm_id::private_data): at most 56 bytes for RC
    /// over InfiniBand and RoCE; more ends the connect with invalid_argument
    /// (rdma_connect's EINVAL, or, beyond 255 bytes, the library's).
    std::vector<std::uint8_t> private_data;
};

namespace detail {

/// How a connect hands over its connection: as its result.
struct connection_as_result {
    template <class Self, class Connection>
    void operator()(Self& self, error_code ec, Connection&& conn) const {
        self.complete(ec, std::forward<Connection>(conn));
    }
};
/// Or into the caller's connection object, by move assignment (which closes
/// what it held): a closed connection on error.
template <class Connection>
struct connection_into {
    Connection* target;
    template <class Self>
    void operator()(Self& self, error_code ec, Connection&& conn) const {
        *target = std::move(conn);
        self.complete(ec);
    }
};

template <class Executor, class Deliver, class Prepare = no_preparation>
struct connect_op {
    using connection_type = basic_connection<Executor>;
    using results_type = asio::ip::tcp::resolver::results_type;
    using step = connect_step;
    using notes = connect_diagnostics_access;

    connect_op(Executor executor, std::string host_name, std::string service_name,
               std::vector<asio::ip::tcp::endpoint> given, const connect_options& opts, Deliver how,
               Prepare prep = {})
        : ex(std::move(executor)), host(std::move(host_name)), service(std::move(service_name)),
          endpoints(std::move(given)), options(opts), deliver(std::move(how)),
          prepare(std::move(prep)), id(ex), conn(ex) {}

    Executor ex;
    std::string host; // empty: `endpoints` are given
    std::string service;
    std::vector<asio::ip::tcp::endpoint> endpoints;
    connect_options options;
    Deliver deliver;
    Prepare prepare;
    std::size_t next = 0;
    bool ended_at_launch = false;
    error_code last;
    step at = step::resolve_address;
    basic_cm_id<Executor> id;
    connection_type conn;
    std::unique_ptr<asio::ip::tcp::resolver> resolver;

    // Launched: the host name's addresses, or the first endpoint.
    template <class Self>
    void operator()(Self& self) {
        if (ended_at_launch) // posted by try_next: nothing was started
            return deliver(self, last, std::move(conn));
        self.reset_cancellation_state(asio::enable_partial_cancellation());
        notes::clear(options.diagnostics);
        if (host.empty())
            return try_next(self, true);
        notes::looking_up(options.diagnostics, host, service);
        resolver = std::make_unique<asio::ip::tcp::resolver>(ex);
        resolver->async_resolve(host, service, std::move(self));
    }

    // The host name's addresses.
    template <class Self>
    void operator()(Self& self, error_code ec, results_type results) {
        resolver.reset();
        if (!ec && composed_cancelled(self))
            ec = asio::error::operation_aborted;
        if (ec) {
            notes::add(options.diagnostics, step::resolve_host, {}, ec);
            return deliver(self, ec, std::move(conn));
        }
        for (const auto& entry : results)
            endpoints.push_back(entry.endpoint());
        try_next(self);
    }

    // A step's outcome.
    template <class Self>
    void operator()(Self& self, error_code ec) {
        if (!ec && composed_cancelled(self))
            ec = asio::error::operation_aborted;
        if (ec)
            return give_up(self, ec);
        switch (at) {
        case step::resolve_address:
            at = step::resolve_route;
            return id.async_resolve_route(options.resolve_timeout, std::move(self));
        case step::resolve_route:
            at = step::make_connection;
            if (error_code made = make_connection())
                return give_up(self, made);
            prepare(conn); // the first receives, before the peer may send
            if (composed_cancelled(self))
                return give_up(self, asio::error::operation_aborted);
            at = step::connect;
            if (options.private_data.empty())
                return conn.id().async_connect(std::move(self));
            return connect_with_private_data(self);
        case step::resolve_host:    // the resolver's outcome has an operator() of its own
        case step::make_connection: // never the step an outcome arrives for
        case step::connect:
            return deliver(self, ec, std::move(conn));
        }
    }

private:
    // This endpoint failed with `ec` at step `at`: the next one, unless cancelled.
    template <class Self>
    void give_up(Self& self, error_code ec) {
        last = connect_step_error(at, ec);
        notes::add(options.diagnostics, at, endpoints[next - 1], last);
        id.close();
        conn.close();
        if (ec == asio::error::operation_aborted)
            return deliver(self, ec, std::move(conn));
        try_next(self);
    }

    // `launching`: called from the launch, where the end must be posted.
    template <class Self>
    void try_next(Self& self, bool launching = false) {
        while (next < endpoints.size()) {
            const asio::ip::tcp::endpoint& endpoint = endpoints[next++];
            basic_cm_event_channel<Executor> channel(ex, last);
            if (!last)
                id.open(channel, last);
            if (last) { // no channel or id (EMFILE, ...): the next endpoint
                notes::add(options.diagnostics, step::resolve_address, endpoint, last);
                continue;
            }
            at = step::resolve_address;
            return id.async_resolve_addr(nullptr, endpoint.data(), options.resolve_timeout,
                                         std::move(self));
        }
        if (!last)
            last = asio::error::host_not_found; // no endpoint to try
        if (launching) {
            ended_at_launch = true;
            return asio::post(ex, std::move(self));
        }
        deliver(self, last, std::move(conn));
    }

    // The library's parameters, with the options' private data.
    template <class Self>
    void connect_with_private_data(Self& self) {
        error_code ec;
        rdma_conn_param param = default_conn_param(conn.id(), ec);
        if (!ec && options.private_data.size() > 255)
            ec = asio::error::invalid_argument; // rdma_conn_param's length is 8 bits
        if (ec)
            return give_up(self, ec);
        param.private_data = options.private_data.data();
        param.private_data_len = static_cast<std::uint8_t>(options.private_data.size());
        conn.id().async_connect(param, std::move(self)); // copies the private data
    }

    error_code make_connection() {
        try {
            ibv_context* verbs = id.native_handle()->verbs;
            const protection_domain pd(verbs);
            if (std::shared_ptr<completion_queue> cq =
                    shared_cq_for<Prepare>(id.native_handle(), ex, options.connection)) {
                conn = connection_type(on_shared_cq_t{}, std::move(id), pd, std::move(cq),
                                       options.connection);
                return {};
            }
            const basic_completion_channel<Executor> channel(ex, verbs);
            conn = connection_type(cqs_on_id_executor_t{}, std::move(id), channel, pd,
                                   options.connection);
            return {};
        } catch (const system_error& e) {
            return e.code();
        } catch (const std::bad_alloc&) {
            return errno_code(ENOMEM);
        }
    }
};

} // namespace detail
} // namespace rdma_asio
