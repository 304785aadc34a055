// A byte stream over an RC connection, for Asio's algorithms (async_read,
// async_write, async_read_until), asio::ssl::stream and Boost.Beast.
#pragma once

#include "rdma_asio/acceptor.hpp"
#include "rdma_asio/connect.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/stream/stream_core.hpp"
#include "rdma_asio/detail/stream/stream_io_start.hpp"
#include "rdma_asio/detail/stream/stream_open_start.hpp"
#include "rdma_asio/stream_options.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_stream;

/// A stream on the default executor type.
using stream = basic_stream<>;

namespace detail {
template <class Target, class Start>
struct stream_open_op;

/// An execution context with an executor (an io_context, say), as the functions
/// that take one instead of an executor accept.
template <class T>
concept context_with_executor = std::is_convertible_v<T&, asio::execution_context&> &&
    requires(T& context) {
    context.get_executor();
};
} // namespace detail

/// A byte stream over an RC connection, as Asio's AsyncReadStream and
/// AsyncWriteStream: async_read_some and async_write_some, and so
/// asio::async_read, async_write, async_read_until and asio::ssl::stream.
/// Made by rdma_asio::async_accept(acceptor, stream, token) or
/// rdma_asio::async_connect(stream, endpoint, token).
///
/// Designed for RDMA, not as a socket emulation: each side registers a ring
/// (stream_options::receive_ring) that the peer fills with RDMA writes, each
/// notified by its immediate data; the writer sends only what the reader's
/// ring has room for and the reader's posted receives can take, both returned
/// by the reader's credit records, so no write meets RNR and no byte is
/// overwritten before it is read. A small async_write_some copies its bytes
/// into a registered copy of the peer's ring and completes once they are
/// copied, with the number taken (at most the room the peer's ring has). They
/// go at once when this side's previous RDMA write is done; writes made while
/// it is not are gathered into one RDMA write that goes when it is (or when
/// they fill an eighth of the ring). A large one (stream_options::zero_copy_from) is written from
/// the caller's memory, registered for that write with local access only, and completes when the
/// device is done with it. async_read_some copies what arrived into the caller's buffers.
/// Registered memory: this side's ring plus a copy of the peer's, a few hundred bytes more, and a
/// large write's own while in flight.
///
/// Cancellation (terminal, partial, total) of a read or a write that waits:
/// it ends with operation_aborted and nothing read or written; no byte is
/// lost (the bytes stay for the next read). A read or write that found bytes or
/// room completes at once (posted) and is not cancelled; a large write in flight
/// from the caller's memory ends only when the device is done with it.
///
/// shutdown(): the peer's reads end with eof once they have read everything
/// written before. close(): as a TCP socket's close(), what the completed
/// writes took is delivered, then the end (the peer reads it all, then eof),
/// and the connection goes once those RDMA writes are done, without blocking
/// and without waiting for the peer's credit: bytes that need more of the
/// peer's room than it has then are dropped. A connection that ends without
/// close() (its process gone) ends the peer's reads with errc::disconnected.
/// One read and one write may wait at a time (a second: already_started).
template <class Executor>
class basic_stream : public asio::socket_base {
public:
    using executor_type = Executor;
    using endpoint_type = asio::ip::tcp::endpoint;
    using lowest_layer_type = basic_stream;
    using connection_type = basic_connection<Executor>;

    template <class Executor1>
    struct rebind_executor {
        using other = basic_stream<Executor1>;
    };

    /// A stream that is not open, with the memory sizes `options`. Nothing is
    /// allocated until an accept or a connect into it is launched. Throws
    /// system_error (invalid_argument) naming the option for sizes a stream
    /// cannot have: a receive_ring of 0 or of more than 2^30 - 1 bytes, an
    /// initial_receive_ring of 0, fewer than 4 notices, a negative
    /// shrink_after_idle.
    explicit basic_stream(const detail::executor_or_context<Executor>& ex,
                          const stream_options& options = {})
        : ex_(ex.executor()), options_(checked(options)) {}
    /// The moved-from stream is not open.
    basic_stream(basic_stream&& other) noexcept = default;
    /// The same from a stream of another executor type that converts to this
    /// one's (asio::as_default_on, a strand's executor to any_io_executor).
    template <class Executor1>
    requires std::is_convertible_v<Executor1, Executor>
    basic_stream(basic_stream<Executor1>&& other)
        : core_(std::move(other.core_)), ex_(other.ex_), options_(other.options_) {}
    /// Closes this stream (as close() does) before taking `other`'s.
    basic_stream& operator=(basic_stream&& other) noexcept { return assign(std::move(other)); }
    /// The same from a stream of another executor type that converts to this one's.
    template <class Executor1>
    requires std::is_convertible_v<Executor1, Executor> basic_stream&
    operator=(basic_stream<Executor1>&& other) {
        return assign(std::move(other));
    }
    ~basic_stream() { close(); }

    executor_type get_executor() const noexcept { return ex_; }
    lowest_layer_type& lowest_layer() noexcept { return *this; }
    const lowest_layer_type& lowest_layer() const noexcept { return *this; }
    bool is_open() const noexcept { return core_ != nullptr; }
    const stream_options& options() const noexcept { return options_; }

    /// The waiting read and write end with operation_aborted. Not open: nothing
    /// to cancel, and no error.
    void cancel() {
        if (core_)
            core_->cancel();
    }
    /// The same; not open: bad_descriptor, as a socket's cancel(ec).
    void cancel(error_code& ec) {
        if (!not_open(ec))
            core_->cancel();
    }
    /// Cancels; delivers what the completed writes took, then the end; then
    /// closes the connection (see the class's description). Idempotent.
    void close() {
        if (auto core = std::move(core_))
            core->close();
    }
    /// The same; nothing can fail, so `ec` is cleared.
    void close(error_code& ec) {
        close();
        ec.clear();
    }
    /// Sends the end after what was written: the peer's reads end with eof once
    /// they have read everything before it. Writes after it end with
    /// broken_pipe. Not open: nothing to do.
    void shutdown() {
        if (core_)
            core_->shutdown();
    }
    /// As a TCP socket's shutdown: shutdown_send is shutdown(); shutdown_receive
    /// ends the waiting read and later ones with eof, and drops what arrives
    /// (credited to the peer as read, so its writes go on); shutdown_both is
    /// both. Errors: bad_descriptor when not open.
    void shutdown(shutdown_type what, error_code& ec) {
        if (not_open(ec))
            return;
        if (what == shutdown_send || what == shutdown_both)
            core_->shutdown();
        if (what == shutdown_receive || what == shutdown_both)
            core_->shutdown_receive();
    }
    /// The same; throws system_error naming the call.
    void shutdown(shutdown_type what) {
        error_code ec;
        shutdown(what, ec);
        detail::throw_if_error(ec, "rdma_asio::stream::shutdown");
    }

    /// This side's address and port, and the peer's (the connection's: see
    /// connection::local_endpoint). Errors: bad_descriptor when not open or
    /// once the connection has gone (after close(), or after it failed).
    endpoint_type local_endpoint(error_code& ec) const { return endpoint_of(false, ec); }
    endpoint_type local_endpoint() const {
        return detail::endpoint_or_throw([this](error_code& ec) { return local_endpoint(ec); },
                                         "rdma_asio::stream::local_endpoint");
    }
    endpoint_type remote_endpoint(error_code& ec) const { return endpoint_of(true, ec); }
    endpoint_type remote_endpoint() const {
        return detail::endpoint_or_throw([this](error_code& ec) { return remote_endpoint(ec); },
                                         "rdma_asio::stream::remote_endpoint");
    }

    /// The bytes a read would take now without waiting (0 after
    /// shutdown_receive). Errors: bad_descriptor when not open.
    std::size_t available(error_code& ec) const { return not_open(ec) ? 0 : core_->available(); }
    std::size_t available() const {
        error_code ec;
        const std::size_t n = available(ec);
        detail::throw_if_error(ec, "rdma_asio::stream::available");
        return n;
    }

    /// Reads what has arrived, at least one byte, waiting for it when none has.
    /// Signature: void(error_code, std::size_t). Errors: eof after the peer's
    /// shutdown() once everything before it was read; errc::disconnected when
    /// the connection ended without it; bad_descriptor when not open.
    template <class MutableBufferSequence,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_read_some(const MutableBufferSequence& buffers,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return initiate<asio::mutable_buffer>(buffers, std::forward<CompletionToken>(token));
    }

    /// Writes as much of `buffers` as the peer's ring has room for now (at
    /// least one byte), waiting for room when there is none. Signature:
    /// void(error_code, std::size_t). Errors: errc::disconnected (or another
    /// error of the connection), bad_descriptor when not open.
    template <class ConstBufferSequence,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_write_some(const ConstBufferSequence& buffers,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return initiate<asio::const_buffer>(buffers, std::forward<CompletionToken>(token));
    }

    /// No blocking read_some or write_some (so no asio::read, asio::write or
    /// Beast's synchronous http::read over a stream): its bytes arrive by
    /// completions its executor's io_context delivers, which a thread blocked in
    /// such a call would have to run itself. Deleted, so that a call fails to
    /// compile at the line below, which says what to use; Asio's and Beast's
    /// traits (is_sync_read_stream) see no synchronous stream.
    template <class... Args>
    std::size_t read_some(Args&&...) = delete; // blocking: use async_read_some or asio::async_read
    template <class... Args>
    std::size_t
    write_some(Args&&...) = delete; // blocking: use async_write_some or asio::async_write

private:
    template <class Target, class Start>
    friend struct detail::stream_open_op;

    // A read or a write, through the library's one initiation
    // (detail::initiate_operation): bad_descriptor (posted) when the stream is
    // not open, else started on the core with the buffers it keeps (the first
    // 16 of the sequence, taken as the operation is launched).
    template <class Buffer, class Buffers, class CompletionToken>
    auto initiate(const Buffers& buffers, CompletionToken&& token) {
        constexpr bool read = std::is_same_v<Buffer, asio::mutable_buffer>;
        return detail::initiate_operation<void(error_code, std::size_t),
                                          detail::stream_io_start<Buffer>>(
            core_, ex_,
            read ? "rdma_asio::stream::async_read_some" : "rdma_asio::stream::async_write_some",
            std::forward<CompletionToken>(token), buffers);
    }

    template <class Other>
    basic_stream& assign(Other&& other) {
        if (static_cast<const void*>(this) != static_cast<const void*>(&other)) {
            close();
            core_ = std::move(other.core_);
            ex_ = other.ex_;
            options_ = other.options_;
        }
        return *this;
    }

    bool not_open(error_code& ec) const {
        if (core_) {
            ec.clear();
            return false;
        }
        ec = asio::error::bad_descriptor;
        return true;
    }

    endpoint_type endpoint_of(bool peer, error_code& ec) const {
        return not_open(ec) ? endpoint_type() : core_->endpoint(peer, ec);
    }

    static const stream_options& checked(const stream_options& options) {
        if (const char* wrong = detail::stream_limits_error(
                {options.receive_ring, static_cast<std::uint32_t>(options.notices)}))
            detail::throw_error(asio::error::invalid_argument,
                                (std::string("rdma_asio::stream: ") + wrong).c_str());
        if (options.initial_receive_ring == 0)
            detail::throw_error(asio::error::invalid_argument,
                                "rdma_asio::stream: the first receive ring is empty "
                                "(stream_options::initial_receive_ring: at least 1 byte)");
        if (options.shrink_after_idle.count() < 0)
            detail::throw_error(asio::error::invalid_argument,
                                "rdma_asio::stream: a negative idle time before a ring shrinks "
                                "(stream_options::shrink_after_idle: zero or more)");
        return options;
    }

    // What prepares each connection an accept or a connect into this stream makes,
    // the state it makes with this stream's executor and options put `into`.
    detail::stream_prepare
    preparation(std::shared_ptr<std::shared_ptr<detail::stream_core>> into) const {
        return detail::stream_prepare(std::move(into), asio::any_io_executor(ex_), options_);
    }

    template <class Executor1>
    friend class basic_stream;

    std::shared_ptr<detail::stream_core> core_;
    Executor ex_;
    stream_options options_;
};

namespace detail {

// Where an accept or a connect puts the stream, and what it completes with: the
// caller's stream (error_code), a new stream held by the operation (error_code and
// the stream, as Asio's accept that completes with a new socket), or the caller's
// stream reporting the address it connected to (error_code and the endpoint, as
// asio::async_connect over endpoints).
template <class Stream>
struct into_stream {
    using signature = void(error_code);
    Stream* target;
    Stream& stream() noexcept { return *target; }
    template <class Self>
    void complete(Self& self, error_code ec) {
        self.complete(ec);
    }
};
template <class Stream>
struct new_stream {
    using signature = void(error_code, Stream);
    Stream target;
    Stream& stream() noexcept { return target; }
    template <class Self>
    void complete(Self& self, error_code ec) {
        self.complete(ec, std::move(target));
    }
};
template <class Stream>
struct into_stream_to_endpoint {
    using signature = void(error_code, asio::ip::tcp::endpoint);
    Stream* target;
    Stream& stream() noexcept { return *target; }
    template <class Self>
    void complete(Self& self, error_code ec) {
        error_code unknown; // the connection gone already: the endpoint is not known
        self.complete(ec, ec ? asio::ip::tcp::endpoint() : target->remote_endpoint(unknown));
    }
};

// The operation behind the accepts and connects into a stream: `start(prepare,
// handler)` (stream_open_start.hpp) makes the connection, `prepare` registering the
// state's memory and posting its receives before the connection is accepted or
// connected; the hello follows, and the stream `to` names takes the state. The
// operation goes to `start` as a handler erased to one type, so that the accept or
// connect under it is not compiled again for each program's handler.
// Two call operators instead of one with default arguments, so that no connection is
// made empty: an executor type without a default constructor (a strand's) has no
// empty connection.
template <class Target, class Start>
struct stream_open_op {
    Target to;
    // The state of the latest connection prepared (stream_prepare), shared with
    // `prepare`, which the accept or connect holds.
    std::shared_ptr<std::shared_ptr<stream_core>> prepared;
    Start start;

    template <class Self>
    void operator()(Self& self) {
        // Nothing of the stream is allocated before a connection is prepared, after
        // the operation is launched (asio::deferred may never launch it).
        prepared = std::make_shared<std::shared_ptr<stream_core>>();
        // Taken out first: moving `self` moves this object, `start` and its members
        // (the endpoint, the options) with it.
        Start go = std::move(start);
        stream_prepare prepare = to.stream().preparation(prepared);
        // The fallback executor is never taken: a composed operation has its own.
        typename Start::handler_type handler(std::move(self), to.stream().get_executor());
        std::move(go)(std::move(prepare), std::move(handler));
    }
    template <class Self, class Connection>
    void operator()(Self& self, error_code ec, Connection conn) {
        std::shared_ptr<stream_core> core = std::move(*prepared);
        if (!ec && !core)
            ec = errno_code(ENOMEM);
        if (!ec)
            ec = core->start(stream_core::connection_type(std::move(conn)));
        if (!ec) {
            to.stream().close();
            to.stream().core_ = std::move(core);
        }
        to.complete(self, ec);
    }
};

// Starts `start` into `to` (see stream_open_op) with `token`, the handler's default
// executor `ex`.
template <class Target, class Start, class Token>
auto open_stream(Target to, Start start, Token&& token, const auto& ex) {
    return asio::async_compose<Token, typename Target::signature>(
        stream_open_op<Target, Start>{std::move(to), nullptr, std::move(start)}, token, ex);
}

// Connects into `to` by `host` and `service`, or over `endpoints` when they are given.
template <class Target, class Executor, class Token>
auto connect_into(Target to, const Executor& ex, std::string host, std::string service,
                  std::vector<asio::ip::tcp::endpoint> endpoints, const connect_options& options,
                  Token&& token) {
    return open_stream(std::move(to),
                       stream_connect_start<Executor>{ex, std::move(host), std::move(service),
                                                      std::move(endpoints), options},
                       std::forward<Token>(token), ex);
}

// Connects the caller's `stream`, completing with an error_code.
template <class Executor, class Token>
auto connect_stream(basic_stream<Executor>& stream, std::string host, std::string service,
                    std::vector<asio::ip::tcp::endpoint> endpoints, const connect_options& options,
                    Token&& token) {
    return connect_into(into_stream<basic_stream<Executor>>{&stream}, stream.get_executor(),
                        std::move(host), std::move(service), std::move(endpoints), options,
                        std::forward<Token>(token));
}

/// A completion token, not connect_options: the overloads without options take it.
template <class Token>
concept not_connect_options = !std::is_same_v<std::remove_cvref_t<Token>, connect_options>;

template <class T>
inline constexpr bool is_stream = false;
template <class Executor>
inline constexpr bool is_stream<basic_stream<Executor>> = true;

/// A completion token, not one of the other accepts' arguments: the accept with
/// the default stream_options takes it.
template <class Token>
concept accept_token =
    !std::is_same_v<std::remove_cvref_t<Token>, stream_options> &&
    !is_stream<std::remove_cvref_t<Token>> && !executor<std::remove_cvref_t<Token>> &&
    !std::is_convertible_v<std::remove_cvref_t<Token>&, asio::execution_context&>;

/// A sequence of endpoints, or of what converts to one (a resolver's results).
template <class Endpoints>
concept endpoint_sequence = std::ranges::input_range<const Endpoints> &&
    std::is_convertible_v<std::ranges::range_reference_t<const Endpoints>, asio::ip::tcp::endpoint>;

template <class Target, class Executor, class Token>
auto accept_into(basic_acceptor<Executor>& acceptor, Target target, Token&& token) {
    return open_stream(std::move(target), stream_accept_start<Executor>{&acceptor},
                       std::forward<Token>(token), acceptor.get_executor());
}

template <class Executor, class Token>
auto accept_stream(basic_acceptor<Executor>& acceptor, basic_stream<Executor>& stream,
                   Token&& token) {
    return accept_into(acceptor, into_stream<basic_stream<Executor>>{&stream},
                       std::forward<Token>(token));
}

} // namespace detail

/// Accepts the next connection into `stream` (closed first when open, as the
/// operation completes), with the stream's memory registered and its receives
/// posted before rdma_accept(3). Signature: void(error_code). Errors: those of
/// acceptor::async_accept, and of registering the stream's memory.
/// acceptor.async_accept(stream, token) is the same.
template <class Executor, class Token = asio::default_completion_token_t<Executor>>
auto async_accept(basic_acceptor<Executor>& acceptor, basic_stream<Executor>& stream,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return detail::accept_stream(acceptor, stream, std::forward<Token>(token));
}

/// Accepts the next connection into a new stream with `options`, on the
/// acceptor's executor, as a TCP acceptor's async_accept(token) completes with a
/// new socket. Signature: void(error_code, basic_stream<Executor>); on error the
/// stream is not open. Errors: as async_accept(acceptor, stream, token).
template <class Executor, class Token = asio::default_completion_token_t<Executor>>
auto async_accept(basic_acceptor<Executor>& acceptor, const stream_options& options,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return detail::accept_into(acceptor,
                               detail::new_stream<basic_stream<Executor>>{
                                   basic_stream<Executor>(acceptor.get_executor(), options)},
                               std::forward<Token>(token));
}

/// The same with the default stream_options: `co_await
/// rdma_asio::async_accept(acceptor, token)` where a TCP program writes `co_await
/// acceptor.async_accept(token)` (the acceptor's own async_accept completes with a
/// connection).
template <class Executor, detail::accept_token Token = asio::default_completion_token_t<Executor>>
auto async_accept(basic_acceptor<Executor>& acceptor,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_accept(acceptor, stream_options{}, std::forward<Token>(token));
}

/// The same, the new stream on `ex`, as a TCP acceptor's async_accept(ex, token).
/// Signature: void(error_code, basic_stream<Executor1>). The handler's default
/// executor is the acceptor's.
template <class Executor, detail::executor Executor1,
          class Token = asio::default_completion_token_t<Executor>>
auto async_accept(basic_acceptor<Executor>& acceptor, const Executor1& ex,
                  const stream_options& options,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return detail::accept_into(
        acceptor, detail::new_stream<basic_stream<Executor1>>{basic_stream<Executor1>(ex, options)},
        std::forward<Token>(token));
}

/// The same, the new stream on `context`'s executor (an io_context, say).
/// Signature: void(error_code, basic_stream<ExecutionContext::executor_type>).
template <class Executor, detail::context_with_executor ExecutionContext,
          class Token = asio::default_completion_token_t<Executor>>
auto async_accept(basic_acceptor<Executor>& acceptor, ExecutionContext& context,
                  const stream_options& options,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_accept(acceptor, context.get_executor(), options, std::forward<Token>(token));
}

/// The same on `ex` or `context` with the default stream_options, as a TCP
/// acceptor's async_accept(ex, token): `rdma_asio::async_accept(acceptor,
/// asio::make_strand(ioc), handler)` gives each stream a strand of its own.
template <class Executor, class ExecutorOrContext,
          detail::accept_token Token = asio::default_completion_token_t<Executor>>
requires detail::executor<std::remove_cvref_t<ExecutorOrContext>> ||
    detail::context_with_executor<std::remove_reference_t<ExecutorOrContext>>
auto async_accept(basic_acceptor<Executor>& acceptor, ExecutorOrContext&& ex_or_context,
                  Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_accept(acceptor, ex_or_context, stream_options{}, std::forward<Token>(token));
}

/// Connects `stream` to `endpoint`, as async_connect(ex, endpoint, options, token)
/// does (`options` for the connection's queues, its CQs' spin budget, the private
/// data), with the stream's memory registered and its receives posted before
/// rdma_connect(3). Signature: void(error_code).
template <class Executor, class Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, const asio::ip::tcp::endpoint& endpoint,
                   const connect_options& options,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    return detail::connect_stream(stream, {}, {}, {endpoint}, options, std::forward<Token>(token));
}

/// The same with the default connect_options.
template <class Executor,
          detail::not_connect_options Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, const asio::ip::tcp::endpoint& endpoint,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(stream, endpoint, connect_options{}, std::forward<Token>(token));
}

/// Connects `stream` to `host` (a name or an address) and `service` (a port
/// number or a service name), as async_connect(ex, host, service, options, token)
/// does for a connection: resolved with asio::ip::tcp::resolver, each address in
/// turn until one connects; the error is the last address's (or the resolver's:
/// host_not_found, ...). Signature: void(error_code).
template <class Executor, class Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, std::string_view host, std::string_view service,
                   const connect_options& options,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    return detail::connect_stream(stream, std::string(host), std::string(service), {}, options,
                                  std::forward<Token>(token));
}

/// The same with the default connect_options.
template <class Executor,
          detail::not_connect_options Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, std::string_view host, std::string_view service,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(stream, host, service, connect_options{}, std::forward<Token>(token));
}

/// Connects `stream` to the first of `endpoints` that accepts, trying each in
/// turn, as asio::async_connect(socket, endpoints, token) does: `endpoints` is a
/// sequence of asio::ip::tcp::endpoint or of what converts to one (a resolver's
/// results). Signature: void(error_code, asio::ip::tcp::endpoint): the endpoint
/// connected to; on error a default endpoint, the error the last endpoint's, and
/// host_not_found when the sequence is empty. (asio::async_connect itself takes only
/// Asio's sockets.)
template <class Executor, detail::endpoint_sequence Endpoints,
          class Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, const Endpoints& endpoints,
                   const connect_options& options,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    std::vector<asio::ip::tcp::endpoint> tried;
    for (const auto& e : endpoints)
        tried.push_back(e);
    return detail::connect_into(detail::into_stream_to_endpoint<basic_stream<Executor>>{&stream},
                                stream.get_executor(), {}, {}, std::move(tried), options,
                                std::forward<Token>(token));
}

/// The same with the default connect_options.
template <class Executor, detail::endpoint_sequence Endpoints,
          detail::not_connect_options Token = asio::default_completion_token_t<Executor>>
auto async_connect(basic_stream<Executor>& stream, const Endpoints& endpoints,
                   Token&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(stream, endpoints, connect_options{}, std::forward<Token>(token));
}

} // namespace rdma_asio
