// Boost.Beast's websocket over rdma_asio::stream (the Boost.Asio flavour only:
// Beast is written against Boost.Asio). Include this header where a
// boost::beast::websocket::stream<rdma_asio::stream> is used: Beast finds these by
// argument-dependent lookup when a websocket closes (after the closing handshake,
// or after a failure) and when its timeout ends a connection
// (boost::beast::close_socket), as it finds its own for a TCP socket.
//
// What they do: close the stream. A stream's close() delivers what its completed
// writes took, then its end (the peer reads everything, then eof), and lets the
// connection go once those writes are done, without blocking. That is what
// Beast's teardown of a TCP socket achieves by shutting down sending and reading
// until the peer's end: the close frame the websocket wrote reaches the peer
// before the connection goes. Neither waits for the peer's end, so neither
// blocks. Over asio::ssl::stream<rdma_asio::stream>, Beast's own teardown of
// the TLS stream (<boost/beast/websocket/ssl.hpp>) applies.
#pragma once

#include "rdma_asio/stream.hpp"

#if !RDMA_ASIO_USE_BOOST_ASIO
#error                                                                                             \
    "rdma_asio/beast.hpp: Boost.Beast needs rdma_asio built for Boost.Asio (-DRDMA_ASIO_ASIO=boost)"
#endif

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/role.hpp>

#include <utility>

namespace rdma_asio {

/// Closes `stream` for boost::beast::close_socket (a websocket's timeout, say).
template <class Executor>
void beast_close_socket(basic_stream<Executor>& stream) {
    stream.close();
}

/// Closes `stream` for a websocket's teardown (see the header's comment).
/// Synchronous websocket calls do not compile over a stream, which has no
/// blocking reads or writes; this is here for code that names it.
template <class Executor>
void teardown(boost::beast::role_type, basic_stream<Executor>& stream, error_code& ec) {
    stream.close(ec);
}

/// Closes `stream` for a websocket's asynchronous teardown, and completes
/// `handler` with no error, posted (never inside the call). Signature:
/// void(error_code).
template <class Executor, class TeardownHandler>
void async_teardown(boost::beast::role_type, basic_stream<Executor>& stream,
                    TeardownHandler&& handler) {
    error_code ec;
    stream.close(ec);
    boost::asio::post(stream.get_executor(),
                      boost::asio::append(std::forward<TeardownHandler>(handler), ec));
}

} // namespace rdma_asio
