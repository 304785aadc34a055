// What echo_server and echo_client share: per-device verbs objects (a PD and a
// completion channel for every connection on that device), a connection's
// registered message buffers, and posting one send or receive.
#pragma once

#include <rdma_asio/cm_id.hpp>
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/connection.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace echo {

/// A PD and a completion channel per device context that rdma_cm hands out.
class devices {
public:
    explicit devices(asio::any_io_executor ex) : ex_(std::move(ex)) {}
    ~devices();
    struct device {
        ibv_pd* pd = nullptr;
        std::unique_ptr<rdma_asio::completion_channel> channel;
    };
    device& of(ibv_context* verbs);

private:
    asio::any_io_executor ex_;
    std::map<ibv_context*, device> devices_;
};

/// An echo connection: the rdma_cm connection and one registered buffer for one
/// message in flight each way.
class endpoint {
public:
    endpoint(rdma_asio::cm_id id, devices& devs, std::size_t message_size);
    endpoint(const endpoint&) = delete;
    endpoint& operator=(const endpoint&) = delete;

    rdma_asio::connection& conn() noexcept { return conn_; }
    std::uint8_t* send_buffer() noexcept { return buffer_.data(); }
    const std::uint8_t* recv_buffer() const noexcept { return buffer_.data() + size_; }
    std::size_t size() const noexcept { return size_; }

    /// ibv_post_recv / ibv_post_send (signaled) of the whole buffer; throw
    /// std::system_error naming the call.
    void post_recv();
    void post_send(std::size_t length);
    /// Waits for one completion on the CQ and checks its status; false when the
    /// connection ended (flush, disconnect) or the wait was cancelled.
    asio::awaitable<bool> completed(rdma_asio::completion_queue& cq);

private:
    struct mr_deleter {
        void operator()(ibv_mr* mr) const noexcept { ibv_dereg_mr(mr); }
    };
    std::size_t size_;
    std::vector<std::uint8_t> buffer_;
    // Destroyed after the connection, whose QP may still use it until then.
    std::unique_ptr<ibv_mr, mr_deleter> mr_;
    rdma_asio::connection conn_;
};

/// Watches an endpoint's id for DISCONNECTED (or any event that ends the
/// connection) while the messages flow. When it comes, it disconnects this side
/// too (which flushes the QP's work requests) and cancels the CQ waits: a peer
/// that leaves or vanishes ends the message loop instead of leaving it waiting.
class disconnect_watch {
public:
    disconnect_watch(endpoint& ep, const asio::any_io_executor& ex);
    disconnect_watch(const disconnect_watch&) = delete;
    disconnect_watch& operator=(const disconnect_watch&) = delete;
    /// Stops watching and waits until the watch's handler has run; call it
    /// before the endpoint goes away.
    asio::awaitable<void> stop();
    bool disconnected() const noexcept { return disconnected_; }

private:
    endpoint& ep_;
    asio::steady_timer done_;
    bool watching_ = true;
    bool disconnected_ = false;
};

/// The message size, agreed on connect through rdma_cm private data: the client
/// sends its size in the connection request; the server accepts when it uses the
/// same size, else rejects with its own size in the rejection's private data.
/// The data is "ECHO" and the size as a 32-bit big-endian number: the marker
/// tells it from the zeros rdma_cm pads private data with (and from no data).
using size_data = std::array<std::uint8_t, 8>;
size_data encode_size(std::uint32_t size);
/// The size in private data, or nothing when the data is not size_data.
std::optional<std::uint32_t> decode_size(std::span<const std::uint8_t> data);
std::optional<std::uint32_t> decode_size(const void* data, std::size_t length);
/// "server uses 64-byte messages, client asked for 128": what both sides print.
std::string size_mismatch(std::uint32_t server_size, std::uint32_t client_size);

/// Throws sample::bad_value (a usage error) unless `text` is an IPv4 address.
void check_ipv4(const char* text);
/// IPv4 address and port as a sockaddr_in; throws on a bad address.
sockaddr_in ipv4(const std::string& address, unsigned short port);
/// rdma_conn_param for an RC connection with one outstanding RDMA read each way.
rdma_conn_param conn_param();

} // namespace echo
