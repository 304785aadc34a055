#include "echo.hpp"

#include "common/command_line.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include <arpa/inet.h>

#include <cerrno>
#include <span>
#include <system_error>

namespace echo {
namespace {

[[noreturn]] void fail(int e, const char* what) {
    throw std::system_error(e, std::generic_category(), what);
}

rdma_asio::connection connect_resources(rdma_asio::cm_id id, devices& devs) {
    devices::device& dev = devs.of(id.native_handle()->verbs);
    rdma_asio::connection_options options;
    options.send_depth = 4;
    options.recv_depth = 4;
    return rdma_asio::connection(std::move(id), *dev.channel, dev.pd, options);
}

} // namespace

devices::~devices() {
    for (auto& [verbs, dev] : devices_) {
        dev.channel.reset();
        ibv_dealloc_pd(dev.pd);
    }
}

devices::device& devices::of(ibv_context* verbs) {
    auto it = devices_.find(verbs);
    if (it != devices_.end())
        return it->second;
    device dev;
    errno = 0;
    dev.pd = ibv_alloc_pd(verbs);
    if (dev.pd == nullptr)
        fail(errno, "ibv_alloc_pd");
    dev.channel = std::make_unique<rdma_asio::completion_channel>(ex_, verbs);
    return devices_.emplace(verbs, std::move(dev)).first->second;
}

endpoint::endpoint(rdma_asio::cm_id id, devices& devs, std::size_t message_size)
    : size_(message_size), buffer_(2 * message_size),
      conn_(connect_resources(std::move(id), devs)) {
    errno = 0;
    // An int: verbs.h's ibv_reg_mr macro ANDs it with a flag of another enum type.
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    mr_.reset(ibv_reg_mr(conn_.qp()->pd, buffer_.data(), buffer_.size(), access));
    if (!mr_)
        fail(errno, "ibv_reg_mr");
}

void endpoint::post_recv() {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data() + size_),
                static_cast<std::uint32_t>(size_), mr_->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int e = ibv_post_recv(conn_.qp(), &wr, &bad))
        fail(e, "ibv_post_recv");
}

void endpoint::post_send(std::size_t length) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data()),
                static_cast<std::uint32_t>(length), mr_->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int e = ibv_post_send(conn_.qp(), &wr, &bad))
        fail(e, "ibv_post_send");
}

asio::awaitable<bool> endpoint::completed(rdma_asio::completion_queue& cq) {
    ibv_wc wc{};
    auto result = co_await cq.async_poll(std::span<ibv_wc>(&wc, 1),
                                         asio::experimental::as_tuple(asio::use_awaitable));
    co_return !std::get<0>(result) && std::get<1>(result) == 1 && wc.status == IBV_WC_SUCCESS;
}

disconnect_watch::disconnect_watch(endpoint& ep, const asio::any_io_executor& ex)
    : ep_(ep), done_(ex, asio::steady_timer::time_point::max()) {
    ep_.conn().id().async_next([this](std::error_code ec, rdma_asio::cm_event) {
        watching_ = false;
        if (!ec) {
            disconnected_ = true;
            // The peer's rdma_disconnect flushed only its own QP: do the same here
            // (librdmacm moves the QP to the error state), so every outstanding
            // work request completes, then end the waits that are pending now.
            rdma_disconnect(ep_.conn().id().native_handle());
            ep_.conn().recv_cq().cancel();
            ep_.conn().send_cq().cancel();
        }
        done_.cancel();
    });
}

asio::awaitable<void> disconnect_watch::stop() {
    if (!watching_)
        co_return;
    ep_.conn().id().cancel();
    co_await done_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
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

std::optional<std::uint32_t> decode_size(const void* data, std::size_t length) {
    if (data == nullptr)
        return std::nullopt;
    return decode_size({static_cast<const std::uint8_t*>(data), length});
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

sockaddr_in ipv4(const std::string& address, unsigned short port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1)
        fail(EINVAL, "inet_pton");
    return addr;
}

rdma_conn_param conn_param() {
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    return param;
}

} // namespace echo
