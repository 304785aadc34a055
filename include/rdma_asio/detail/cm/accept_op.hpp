// acceptor::async_accept: the listener's next connection request, a connection
// made for it in the acceptor's protection domain and completion channel of the
// request's device (in a protection domain of its own, and on a CQ connections
// share, for a preparation that asks them: preparation_asks.hpp), rdma_accept
// with the library's parameters, then ESTABLISHED.
//
// The program's preparation (async_accept(prepare, token)) runs with the
// connection made, before rdma_accept: its first receives are posted before the
// peer can send (a message that finds none waits for the RNR timer, 655 ms with
// the one rdma_cm sets).
//
// A request the acceptor's screen refuses is rejected with the screen's reply,
// and the accept waits for the next one.
//
// A request whose connection cannot be made (CQ or QP refused: the options ask
// more than the device has) is closed without rdma_accept, which rejects it: the
// peer's connect ends with connection_rejected, and this accept with the error of
// the call that failed. The acceptor goes on listening.
//
// Cancellation (terminal and partial): while no request is taken, as
// cm_id::async_get_request (the request stays for the next accept); once one is
// taken, its connection is closed, and the peer sees its connect fail or its
// connection end.
#pragma once

#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/acceptor_impl.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/cm/preparation_asks.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"

#include <concepts>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace rdma_asio::detail {

/// The request's state as it comes: the accept makes its id object.
struct keep_request {
    std::shared_ptr<cm_id_impl> operator()(std::shared_ptr<cm_id_impl> request) const noexcept {
        return request;
    }
};

/// A program's preparation of a connection before rdma_accept or rdma_connect:
/// called with the connection; not a completion handler (which takes an
/// error_code first).
template <class Prepare, class Connection>
concept preparation =
    std::invocable<Prepare&, Connection&> && !std::invocable<Prepare&, error_code, Connection>;

/// What an accept without a preparation does before rdma_accept: nothing.
struct no_preparation {
    template <class Connection>
    void operator()(Connection&) const noexcept {}
};

template <class Executor, class Prepare>
struct accept_op {
    using connection_type = basic_connection<Executor>;
    using request_signature = void(error_code, std::shared_ptr<cm_id_impl>);

    std::shared_ptr<acceptor_impl> acceptor;
    Executor ex;
    std::uint64_t launched;
    connection_type conn;
    Prepare prepare;

    // Launched: the listener's next request.
    template <class Self>
    void operator()(Self& self) {
        self.reset_cancellation_state(asio::enable_partial_cancellation());
        next_request(self);
    }

    // A request (or why none): its connection, then rdma_accept.
    template <class Self>
    void operator()(Self& self, error_code ec, std::shared_ptr<cm_id_impl> request) {
        basic_cm_id<Executor> id(ex); // closing it rejects the request
        if (request)
            io_object_access::adopt(id, std::move(request));
        if (!ec && !id.is_open())
            ec = errno_code(ENOMEM); // the request's state could not be made: rejected
        if (!ec && composed_cancelled(self))
            ec = asio::error::operation_aborted;
        if (!ec && !acceptor->admits(*io_object_access::state(id))) {
            if (composed_cancelled(self))
                return self.complete(asio::error::operation_aborted, std::move(conn));
            return next_request(self); // rejected by the screen
        }
        if (!ec)
            ec = make_connection(std::move(id));
        if (ec)
            return self.complete(ec, std::move(conn));
        prepare(conn); // the first receives, before the peer may send
        if (composed_cancelled(self))
            return finish(self, asio::error::operation_aborted); // meanwhile (by prepare, say)
        std::shared_ptr<cm_id_impl> accepting = io_object_access::state(conn.id());
        if (!acceptor->add_accepting(launched, accepting))
            return finish(self, asio::error::operation_aborted);
        const std::shared_ptr<acceptor_impl> keep = acceptor;
        const std::uint64_t at_launch = launched;
        conn.id().async_accept(std::move(self)); // `this` is moved from now
        keep->confirm_accepting(at_launch, accepting);
    }

    // rdma_accept's outcome.
    template <class Self>
    void operator()(Self& self, error_code ec) {
        acceptor->remove_accepting(io_object_access::state(conn.id()).get());
        finish(self, ec);
    }

private:
    template <class Self>
    void next_request(Self& self) {
        std::shared_ptr<cm_id_impl> listener = acceptor->listener();
        initiate_operation<request_signature, cm_start<request_signature>>(
            listener ? listener->channel() : nullptr, ex, "rdma_asio::acceptor::async_accept",
            std::move(self), cm_request<keep_request>{{listener}, {}});
    }

    template <class Self>
    void finish(Self& self, error_code ec) {
        if (ec)
            conn.close(); // the peer sees its connect fail or its connection end
        self.complete(ec, std::move(conn));
    }

    error_code make_connection(basic_cm_id<Executor> id) {
        try {
            ibv_context* verbs = id.native_handle()->verbs;
            // Both made before the acceptor's lock is taken.
            protection_domain own;
            if constexpr (owns_protection_domain<Prepare>)
                own = protection_domain(verbs);
            std::shared_ptr<completion_queue> cq =
                shared_cq_for<Prepare>(id.native_handle(), ex, acceptor->options());
            acceptor->with_device(verbs, [&](const auto& channel, const protection_domain& shared) {
                const protection_domain& pd = own.is_open() ? own : shared;
                if (cq)
                    conn = connection_type(on_shared_cq_t{}, std::move(id), pd, std::move(cq),
                                           acceptor->options());
                else
                    conn = connection_type(cqs_on_id_executor_t{}, std::move(id), channel, pd,
                                           acceptor->options());
            });
            return {};
        } catch (const system_error& e) {
            return e.code();
        } catch (const std::bad_alloc&) {
            return errno_code(ENOMEM);
        }
    }
};

/// The Start of async_accept (io_object's initiation, on the acceptor's state).
template <class Executor>
struct accept_start {
    template <class Prepare>
    static basic_connection<Executor> not_open(const Executor& ex, const Prepare&) {
        return basic_connection<Executor>(ex);
    }
    template <class IoExecutor, class Handler, class Prepare>
    void operator()(const std::shared_ptr<acceptor_impl>& acceptor, const IoExecutor& io_ex,
                    Handler&& handler, const Executor& ex, Prepare prepare) const {
        start_composed<void(error_code, basic_connection<Executor>)>(
            accept_op<Executor, Prepare>{acceptor, ex, acceptor->cancellations(),
                                         basic_connection<Executor>(ex), std::move(prepare)},
            std::forward<Handler>(handler), io_ex);
    }
};

} // namespace rdma_asio::detail
