#include "echo.hpp"

#include "common/command_line.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <span>
#include <system_error>

namespace echo {
rdma_asio::connection_options queues() {
    rdma_asio::connection_options options;
    options.send_depth = 4;
    options.receive_depth = 4;
    return options;
}

endpoint::endpoint(rdma_asio::connection conn, std::size_t message_size)
    : size_(message_size), buffer_(2 * message_size),
      mr_(conn.pd(), asio::buffer(buffer_), IBV_ACCESS_LOCAL_WRITE), first_(conn.get_executor(), 1),
      conn_(std::move(conn)) {}

endpoint::endpoint(const asio::any_io_executor& ex, std::size_t message_size)
    : size_(message_size), buffer_(2 * message_size), first_(ex, 1), conn_(ex) {}

// snippet-begin: echo-endpoint
void endpoint::prepare(rdma_asio::connection& conn) {
    mr_ = rdma_asio::memory_region(conn.pd(), asio::buffer(buffer_), IBV_ACCESS_LOCAL_WRITE);
    conn.queue_pair().async_receive(
        recv_buffer(), [self = shared_from_this()](rdma_asio::error_code ec, std::size_t n) {
            self->first_.try_send(ec, n);
        });
}
// snippet-end

asio::awaitable<std::size_t> endpoint::first_message() {
    auto [ec, n] = co_await first_.async_receive(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec)
        throw rdma_asio::system_error(ec, "rdma_asio::queue_pair::async_receive");
    co_return n;
}

asio::awaitable<endpoint::exchange_result> endpoint::exchange(std::size_t n) {
    // One parallel group of the two operations themselves (deferred): no
    // coroutine of their own, as `&&` of two awaitables would spawn.
    auto [order, received_ec, received, sent_ec, sent] =
        co_await asio::experimental::make_parallel_group(
            qp().async_receive(recv_buffer(), asio::experimental::deferred),
            qp().async_send(send_buffer(n), asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    co_return exchange_result{received, received_ec, sent_ec};
}

std::size_t endpoint::exchange_result::get() const {
    if (received_ec)
        throw rdma_asio::system_error(received_ec, "rdma_asio::queue_pair::async_receive");
    if (sent_ec)
        throw rdma_asio::system_error(sent_ec, "rdma_asio::queue_pair::async_send");
    return received;
}

asio::awaitable<std::size_t> endpoint::receive_and_send(std::size_t n) {
    co_return (co_await exchange(n)).get();
}

size_data encode_size(std::uint32_t size) {
    return {'E',
            'C',
            'H',
            'O',
            static_cast<std::uint8_t>(size >> 24),
            static_cast<std::uint8_t>(size >> 16),
            static_cast<std::uint8_t>(size >> 8),
            static_cast<std::uint8_t>(size)};
}

std::optional<std::uint32_t> decode_size(std::span<const std::uint8_t> data) {
    if (data.size() < size_data{}.size() || data[0] != 'E' || data[1] != 'C' || data[2] != 'H' ||
        data[3] != 'O')
        return std::nullopt;
    return std::uint32_t{data[4]} << 24 | std::uint32_t{data[5]} << 16 |
           std::uint32_t{data[6]} << 8 | std::uint32_t{data[7]};
}

std::string size_mismatch(std::uint32_t server_size, std::uint32_t client_size) {
    return "server uses " + std::to_string(server_size) + "-byte messages, client asked for " +
           std::to_string(client_size);
}

void check_ipv4(const char* text) {
    in_addr addr{};
    if (::inet_pton(AF_INET, text, &addr) != 1)
        throw sample::bad_value("expected an IPv4 address such as 10.0.0.1");
}

} // namespace echo
