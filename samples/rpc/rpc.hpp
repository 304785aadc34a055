// What rpc_server and rpc_client share: the messages of the protocol, the server's
// receive depth as the accept's private data, and the verbs objects that the
// connections served by one thread share on one device (one protection domain, one
// pair of CQs, one shared receive queue and one registered pool of message
// buffers; the client, with one thread, has one such pool per device).
#pragma once

#include <rdma_asio/cm_id.hpp>
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/completion_queue.hpp>
#include <rdma_asio/connection.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/protection_domain.hpp>
#include <rdma_asio/shared_receive_queue.hpp>

#include "asio_alias.hpp"

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rpc {

/// Every message, request or response, is this long.
constexpr std::size_t message_size = 32;

/// A call carries an argument and gets answer(argument) back. A goodbye is a
/// connection's last request: its response carries the number of calls the
/// server answered on that connection, and then both ends close the connection.
enum class kind : std::uint32_t { call = 1, goodbye = 2 };

/// A request: "RPQ1", then kind, client, sequence and argument, big-endian.
/// `client` and `sequence` are the client's own numbers, echoed in the response
/// so that it can check which request a response answers.
struct request {
    kind what = kind::call;
    std::uint32_t client = 0;
    std::uint32_t sequence = 0;
    std::uint64_t argument = 0;
};

/// A response: "RPA1", then kind, client, sequence and result, big-endian.
struct response {
    kind what = kind::call;
    std::uint32_t client = 0;
    std::uint32_t sequence = 0;
    std::uint64_t result = 0;
};

using message = std::array<std::uint8_t, message_size>;
message encode(const request& r);
message encode(const response& r);
/// The message in `data`, or nothing when it is not one (a wrong marker or kind,
/// or fewer than message_size bytes).
std::optional<request> decode_request(std::span<const std::uint8_t> data);
std::optional<response> decode_response(std::span<const std::uint8_t> data);

/// What the server computes for a call: a 64-bit mix of the argument, which the
/// client computes as well to check the result.
std::uint64_t answer(std::uint64_t argument);

/// The server's receive depth, in the private data of its accept: "RPC1" and the
/// depth, big-endian. A client keeps at most that many requests in flight over
/// all its connections, so that every request finds a receive posted.
using accept_data = std::array<std::uint8_t, 8>;
accept_data encode_depth(std::uint32_t depth);
/// The depth in private data, or nothing when the data is not accept_data
/// (rdma_cm pads private data with zeros: longer data is fine).
std::optional<std::uint32_t> decode_depth(const void* data, std::size_t length);

/// Throws sample::bad_value (a usage error) unless `text` is an IPv4 address.
void require_ipv4(const char* text);
/// The address and port as a sockaddr_in; throws system_error naming inet_pton.
sockaddr_in socket_address(const std::string& address, unsigned short port);

/// Coroutines waiting for their turn, woken one at a time in the order they
/// started waiting: a steady_timer that never expires, whose waits only
/// cancel_one() ends. (Cancelling all of them for each hand-over would wake
/// thousands of waiters to let one through.)
class wait_queue {
public:
    explicit wait_queue(asio::any_io_executor ex)
        : timer_(std::move(ex), asio::steady_timer::time_point::max()) {}
    /// Waits until wake_one() picks this wait.
    asio::awaitable<void> wait();
    /// Wakes the longest waiting; false when none waits.
    bool wake_one();

private:
    asio::steady_timer timer_;
    std::size_t waiting_ = 0;
};

/// What the connections of one thread on one device share: the protection
/// domain, a completion channel, a send CQ and a receive CQ, a shared receive
/// queue of `depth` receives, and `buffers` message buffers registered once
/// (ibv_reg_mr(3)). The memory does not grow with the connections.
class device_pool {
public:
    device_pool(asio::any_io_executor ex, ibv_context* verbs, std::uint32_t depth,
                std::uint32_t buffers);
    device_pool(const device_pool&) = delete;
    device_pool& operator=(const device_pool&) = delete;

    rdma_asio::protection_domain& pd() noexcept { return pd_; }
    rdma_asio::completion_queue& send_cq() noexcept { return send_cq_; }
    rdma_asio::completion_queue& recv_cq() noexcept { return recv_cq_; }
    rdma_asio::shared_receive_queue& srq() noexcept { return srq_; }
    std::uint32_t depth() const noexcept { return depth_; }
    std::uint32_t buffers() const noexcept { return buffers_; }
    /// Message buffer `i` (of buffers()), for a receive or a send.
    rdma_asio::registered_buffer buffer(std::uint32_t i) const {
        return mr_.at(std::size_t{i} * message_size, message_size);
    }
    std::span<std::uint8_t> bytes(std::uint32_t i) noexcept {
        return {memory_.data() + std::size_t{i} * message_size, message_size};
    }
    /// A connection on this pool's CQs and shared receive queue, whose send queue
    /// holds `send_depth` requests (ibv_qp_cap::max_send_wr). `id` is on this
    /// pool's device (a connection request, or an id with its route resolved).
    rdma_asio::connection make_connection(rdma_asio::cm_id id, std::uint32_t send_depth);
    /// What this pool registered with ibv_reg_mr, in bytes.
    std::size_t registered_bytes() const noexcept { return memory_.size(); }

private:
    std::uint32_t depth_;
    std::uint32_t buffers_;
    rdma_asio::protection_domain pd_;
    rdma_asio::completion_channel channel_;
    rdma_asio::completion_queue send_cq_;
    rdma_asio::completion_queue recv_cq_;
    rdma_asio::shared_receive_queue srq_;
    std::vector<std::uint8_t> memory_;
    // Declared after the memory, so deregistered before it goes.
    rdma_asio::memory_region mr_;
};

/// One device_pool per device context that rdma_cm hands out, made on first use,
/// all on one executor (one thread's).
class device_pools {
public:
    device_pools(asio::any_io_executor ex, std::uint32_t depth, std::uint32_t buffers)
        : ex_(std::move(ex)), depth_(depth), buffers_(buffers) {}
    device_pool& of(ibv_context* verbs);
    /// Called with each pool as it is made (e.g. to start its receives).
    void on_new_pool(std::function<void(device_pool&)> f) { on_new_ = std::move(f); }
    std::size_t registered_bytes() const noexcept;

private:
    asio::any_io_executor ex_;
    std::uint32_t depth_;
    std::uint32_t buffers_;
    std::function<void(device_pool&)> on_new_;
    std::map<ibv_context*, std::unique_ptr<device_pool>> pools_;
};

} // namespace rpc
