// What echo_server and echo_client share: an echo connection (its rdma_cm
// connection, queue pair and registered buffers), the queues it needs, and the
// message size both sides agree on.
#pragma once

#include <rdma_asio/connection.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/queue_pair.hpp>

#include "asio_alias.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace echo {

/// An echo connection: the rdma_cm connection, its queue pair, and a registered
/// buffer of two messages, one to send and one to receive into.
class endpoint : public std::enable_shared_from_this<endpoint> {
public:
    /// Registers the buffers in the connection's protection domain.
    endpoint(rdma_asio::connection conn, std::size_t message_size);
    /// Buffers for a connection not made yet: see prepare().
    endpoint(const asio::any_io_executor& ex, std::size_t message_size);
    endpoint(const endpoint&) = delete;
    endpoint& operator=(const endpoint&) = delete;

    /// For acceptor::async_accept(prepare, token), with the connection made and
    /// not accepted yet: registers the buffers in its protection domain and
    /// posts the first receive, so that the client's first message finds it.
    /// The endpoint must be owned by a std::shared_ptr.
    void prepare(rdma_asio::connection& conn);
    /// The connection, once accepted.
    void adopt(rdma_asio::connection conn) { conn_ = std::move(conn); }
    /// The first message's length (the receive prepare() posted); throws
    /// rdma_asio::system_error when it failed.
    asio::awaitable<std::size_t> first_message();

    rdma_asio::connection& conn() noexcept { return conn_; }
    /// The connection's sends and receives as Asio operations.
    rdma_asio::queue_pair& qp() { return conn_.queue_pair(); }
    std::size_t size() const noexcept { return size_; }
    /// The first `n` bytes of the message to send (all of it by default).
    rdma_asio::registered_buffer send_buffer(std::size_t n) const { return mr_.at(0, n); }
    rdma_asio::registered_buffer send_buffer() const { return send_buffer(size_); }
    rdma_asio::registered_buffer recv_buffer() const { return mr_.at(size_, size_); }

    /// What exchange() did: the bytes received and each operation's error.
    struct exchange_result {
        std::size_t received = 0;
        rdma_asio::error_code received_ec;
        rdma_asio::error_code sent_ec;
        /// `received`; throws rdma_asio::system_error naming the operation that
        /// failed (the receive, when both did).
        std::size_t get() const;
    };

    /// Receives into recv_buffer() and sends the first `n` bytes of
    /// send_buffer(), both at once, the receive posted first (so that the peer's
    /// next message finds it), and waits for both. Each may fail alone: when the
    /// peer disconnects after its last echo came back, that echo's send succeeded
    /// and the receive ends with errc::disconnected.
    asio::awaitable<exchange_result> exchange(std::size_t n);
    /// The same; returns the bytes received. Throws rdma_asio::system_error when
    /// either fails (errc::disconnected once the peer has gone).
    asio::awaitable<std::size_t> receive_and_send(std::size_t n);

private:
    std::size_t size_;
    std::vector<std::uint8_t> buffer_;
    // Deregistered after the connection is gone: its QP may use it until then.
    rdma_asio::memory_region mr_;
    // The outcome of the receive prepare() posted.
    asio::experimental::channel<void(rdma_asio::error_code, std::size_t)> first_;
    rdma_asio::connection conn_;
};

/// The queues of an echo connection: one message in flight each way.
rdma_asio::connection_options queues();

/// The message size, agreed on connect through rdma_cm private data: the client
/// sends its size in the connection request; the server accepts when it uses the
/// same size, else rejects with its own size in the rejection's private data
/// (for a client that reads the REJECTED event itself, with cm_id::async_next).
/// The data is "ECHO" and the size as a 32-bit big-endian number: the marker
/// tells it from the zeros rdma_cm pads private data with (and from no data).
using size_data = std::array<std::uint8_t, 8>;
size_data encode_size(std::uint32_t size);
/// The size in private data, or nothing when the data is not size_data.
std::optional<std::uint32_t> decode_size(std::span<const std::uint8_t> data);
/// "server uses 64-byte messages, client asked for 128": what the server prints.
std::string size_mismatch(std::uint32_t server_size, std::uint32_t client_size);

/// Throws sample::bad_value (a usage error) unless `text` is an IPv4 address.
void check_ipv4(const char* text);

} // namespace echo
