// An echo service over streams and its clients, for the rxe tests that put many
// streams under a fault while their traffic runs (a client process killed, the
// device deleted) and check what each one saw.
#pragma once

#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"
#include "rxe_loopback.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

namespace rdma_asio::test {

/// One stream the server accepted and echoes on, and how it ended.
struct served {
    std::size_t echoed = 0; // bytes written back
    rdma_asio::error_code ended;
    bool done = false; // the stream is destroyed
};

/// Echoes what arrives until a read or a write fails, then destroys the stream.
inline asio::awaitable<void> echo_on(rdma_asio::stream s, served& slot) {
    std::vector<std::uint8_t> buffer(4096);
    for (;;) {
        auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
        if (!ec)
            std::tie(ec, std::ignore) =
                co_await asio::async_write(s, asio::buffer(buffer.data(), n), with_error);
        if (ec) {
            slot.ended = ec;
            break;
        }
        slot.echoed += n;
    }
    s = rdma_asio::stream(s.get_executor()); // its memory and queue pair go now
    slot.done = true;
}

/// Accepts streams with `options` until the acceptor fails or is closed; each one
/// echoes (echo_on) in a slot of its own, appended to `slots` in accept order.
inline asio::awaitable<void> serve_echo(rdma_asio::acceptor& acceptor,
                                        rdma_asio::stream_options options,
                                        std::vector<std::unique_ptr<served>>& slots) {
    for (;;) {
        auto [ec, s] = co_await rdma_asio::async_accept(acceptor, options, with_error);
        if (ec)
            co_return;
        served& slot = *slots.emplace_back(std::make_unique<served>());
        asio::co_spawn(acceptor.get_executor(), echo_on(std::move(s), slot), asio::detached);
    }
}

/// A client of the echo service and what it saw.
struct asker {
    std::size_t requests = 0; // echoes received
    std::size_t wrong = 0;    // of those, ones that differ from their request
    rdma_asio::error_code failed;
    bool done = false;
};

/// Requests of 1 KiB on `s` (the `index`th client: each writes its own bytes),
/// each echo read back and compared, until `stop` or an error.
inline asio::awaitable<void> ask_echoes(rdma_asio::stream& s, std::size_t index, const bool& stop,
                                        asker& out) {
    std::vector<std::uint8_t> request(1024), reply(1024);
    while (!stop) {
        for (std::size_t i = 0; i < request.size(); ++i)
            request[i] = static_cast<std::uint8_t>(index * 13 + out.requests * 5 + i);
        auto [ec, ignored] = co_await asio::async_write(s, asio::buffer(request), with_error);
        if (!ec)
            std::tie(ec, std::ignore) =
                co_await asio::async_read(s, asio::buffer(reply), with_error);
        if (ec) {
            out.failed = ec;
            break;
        }
        out.wrong += reply != request;
        ++out.requests;
    }
    out.done = true;
}

} // namespace rdma_asio::test
