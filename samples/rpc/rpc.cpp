#include "rpc.hpp"

#include "common/big_endian.hpp"
#include "common/command_line.hpp"

#include <rdma_asio/error.hpp>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

namespace rpc {
namespace {

constexpr std::array<std::uint8_t, 4> request_marker{'R', 'P', 'Q', '1'};
constexpr std::array<std::uint8_t, 4> response_marker{'R', 'P', 'A', '1'};
constexpr std::array<std::uint8_t, 4> accept_marker{'R', 'P', 'C', '1'};

using sample::get_be;
using sample::put_be;

// The layout both messages share: marker, kind, client, sequence, a 64-bit
// value; the rest is zeros.
message encode_fields(const std::array<std::uint8_t, 4>& marker, kind what, std::uint32_t client,
                      std::uint32_t sequence, std::uint64_t value) {
    message m{};
    std::memcpy(m.data(), marker.data(), marker.size());
    put_be(m.data() + 4, static_cast<std::uint32_t>(what), 4);
    put_be(m.data() + 8, client, 4);
    put_be(m.data() + 12, sequence, 4);
    put_be(m.data() + 16, value, 8);
    return m;
}

struct fields {
    kind what;
    std::uint32_t client;
    std::uint32_t sequence;
    std::uint64_t value;
};

std::optional<fields> decode_fields(const std::array<std::uint8_t, 4>& marker,
                                    std::span<const std::uint8_t> data) {
    if (data.size() < message_size || std::memcmp(data.data(), marker.data(), marker.size()) != 0)
        return std::nullopt;
    const auto what = static_cast<std::uint32_t>(get_be(data.data() + 4, 4));
    if (what != static_cast<std::uint32_t>(kind::call) &&
        what != static_cast<std::uint32_t>(kind::goodbye))
        return std::nullopt;
    return fields{static_cast<kind>(what), static_cast<std::uint32_t>(get_be(data.data() + 8, 4)),
                  static_cast<std::uint32_t>(get_be(data.data() + 12, 4)),
                  get_be(data.data() + 16, 8)};
}

} // namespace

message encode(const request& r) {
    return encode_fields(request_marker, r.what, r.client, r.sequence, r.argument);
}

message encode(const response& r) {
    return encode_fields(response_marker, r.what, r.client, r.sequence, r.result);
}

std::optional<request> decode_request(std::span<const std::uint8_t> data) {
    const auto f = decode_fields(request_marker, data);
    if (!f)
        return std::nullopt;
    return request{f->what, f->client, f->sequence, f->value};
}

std::optional<response> decode_response(std::span<const std::uint8_t> data) {
    const auto f = decode_fields(response_marker, data);
    if (!f)
        return std::nullopt;
    return response{f->what, f->client, f->sequence, f->value};
}

std::uint64_t answer(std::uint64_t argument) {
    // splitmix64's finaliser: every bit of the argument changes about half of
    // the result's, so a response for another request does not pass for this one.
    std::uint64_t z = argument + 0x9e3779b97f4a7c15;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
}

accept_data encode_depth(std::uint32_t depth) {
    accept_data d{};
    std::memcpy(d.data(), accept_marker.data(), accept_marker.size());
    put_be(d.data() + 4, depth, 4);
    return d;
}

std::optional<std::uint32_t> decode_depth(const void* data, std::size_t length) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (p == nullptr || length < accept_data{}.size() ||
        std::memcmp(p, accept_marker.data(), accept_marker.size()) != 0)
        return std::nullopt;
    return static_cast<std::uint32_t>(get_be(p + 4, 4));
}

void require_ipv4(const char* text) {
    in_addr parsed{};
    if (::inet_pton(AF_INET, text, &parsed) != 1)
        throw sample::bad_value("expected an IPv4 address such as 10.0.0.1");
}

sockaddr_in socket_address(const std::string& address, unsigned short port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
        throw rdma_asio::system_error(EINVAL, asio::error::get_system_category(), "inet_pton");
    return a;
}

asio::awaitable<void> wait_queue::wait() {
    ++waiting_;
    // Ends with operation_aborted, which is the wake-up.
    co_await timer_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
}

bool wait_queue::wake_one() {
    if (waiting_ == 0)
        return false;
    --waiting_;
    timer_.cancel_one();
    return true;
}

device_pool::device_pool(asio::any_io_executor ex, ibv_context* verbs, std::uint32_t depth,
                         std::uint32_t buffers)
    : depth_(depth), buffers_(buffers), pd_(verbs), channel_(ex, verbs),
      // Each CQ holds every completion that can be outstanding: at most one per
      // buffer (a buffer is in one receive or one send at a time).
      send_cq_(channel_, static_cast<int>(buffers)), recv_cq_(channel_, static_cast<int>(depth)),
      srq_(ex, pd_, {.depth = depth, .max_sge = 1}), memory_(std::size_t{buffers} * message_size),
      mr_(pd_, asio::buffer(memory_), IBV_ACCESS_LOCAL_WRITE) {}

rdma_asio::connection device_pool::make_connection(rdma_asio::cm_id id, std::uint32_t send_depth) {
    rdma_asio::connection_options options;
    options.send_depth = send_depth;
    return rdma_asio::connection(std::move(id), pd_, send_cq_, recv_cq_, srq_, options);
}

device_pool& device_pools::of(ibv_context* verbs) {
    auto it = pools_.find(verbs);
    if (it != pools_.end())
        return *it->second;
    auto& pool = *pools_.emplace(verbs, std::make_unique<device_pool>(ex_, verbs, depth_, buffers_))
                      .first->second;
    if (on_new_)
        on_new_(pool);
    return pool;
}

std::size_t device_pools::registered_bytes() const noexcept {
    std::size_t n = 0;
    for (const auto& [verbs, pool] : pools_)
        n += pool->registered_bytes();
    return n;
}

} // namespace rpc
