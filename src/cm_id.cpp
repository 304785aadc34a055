#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <deque>
#include <utility>

namespace rdma_asio {
namespace detail {
namespace {

socklen_t size_of(const sockaddr* addr) noexcept {
    switch (addr->sa_family) {
    case AF_INET:
        return sizeof(sockaddr_in);
    case AF_INET6:
        return sizeof(sockaddr_in6);
    default:
        return sizeof(sockaddr_storage);
    }
}

void copy(sockaddr_storage& to, const sockaddr* from) noexcept {
    std::memcpy(&to, from, size_of(from));
}

} // namespace

cm_call cm_call::resolve_addr(const sockaddr* src, const sockaddr* dst,
                              std::chrono::milliseconds timeout) noexcept {
    cm_call c;
    c.kind_ = kind::resolve_addr;
    if (src != nullptr) {
        copy(c.src_, src);
        c.has_src_ = true;
    }
    copy(c.dst_, dst);
    c.timeout_ms_ = static_cast<int>(timeout.count());
    return c;
}

cm_call cm_call::resolve_route(std::chrono::milliseconds timeout) noexcept {
    cm_call c;
    c.kind_ = kind::resolve_route;
    c.timeout_ms_ = static_cast<int>(timeout.count());
    return c;
}

cm_call cm_call::with_param(kind k, const rdma_conn_param& param) noexcept {
    cm_call c;
    c.kind_ = k;
    c.param_ = param;
    const std::size_t n = std::min<std::size_t>(param.private_data_len, c.private_data_.size());
    if (param.private_data != nullptr && n > 0)
        std::memcpy(c.private_data_.data(), param.private_data, n);
    c.param_.private_data_len = static_cast<std::uint8_t>(n);
    return c;
}

cm_call cm_call::connect(const rdma_conn_param& param) noexcept {
    return with_param(kind::connect, param);
}

cm_call cm_call::accept(const rdma_conn_param& param) noexcept {
    return with_param(kind::accept, param);
}

cm_call cm_call::disconnect() noexcept {
    return cm_call{};
}

int cm_call::operator()(rdma_cm_id* id) noexcept {
    // The copy's private data, wherever this object lives now.
    param_.private_data = param_.private_data_len > 0 ? private_data_.data() : nullptr;
    switch (kind_) {
    case kind::resolve_addr:
        return rdma_resolve_addr(id, has_src_ ? reinterpret_cast<sockaddr*>(&src_) : nullptr,
                                 reinterpret_cast<sockaddr*>(&dst_), timeout_ms_);
    case kind::resolve_route:
        return rdma_resolve_route(id, timeout_ms_);
    case kind::connect:
        return rdma_connect(id, &param_);
    case kind::accept:
        return rdma_accept(id, &param_);
    case kind::disconnect:
        return rdma_disconnect(id);
    }
    errno = EINVAL;
    return -1;
}

} // namespace detail

cm_id::cm_id(cm_event_channel& channel, rdma_port_space ps)
    : ex_(channel.get_executor()), channel_(channel.impl_) {
    checked_channel();
    errno = 0;
    if (rdma_create_id(channel_->channel, &id_, nullptr, ps) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_create_id");
}

cm_id::cm_id(cm_id&& other) noexcept
    : ex_(other.ex_), channel_(std::move(other.channel_)), id_(std::exchange(other.id_, nullptr)) {}

cm_id& cm_id::operator=(cm_id&& other) noexcept {
    if (this != &other) {
        close();
        ex_ = other.ex_;
        channel_ = std::move(other.channel_);
        id_ = std::exchange(other.id_, nullptr);
    }
    return *this;
}

const std::shared_ptr<detail::cm_channel_impl>& cm_id::checked_channel() const {
    if (!channel_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::cm_id: not open");
    return channel_;
}

void cm_id::bind(const sockaddr* addr) {
    errno = 0;
    if (rdma_bind_addr(id_, const_cast<sockaddr*>(addr)) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_bind_addr");
}

void cm_id::listen(int backlog) {
    errno = 0;
    if (rdma_listen(id_, backlog) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_listen");
}

std::uint16_t cm_id::local_port() const noexcept {
    return id_ ? ntohs(rdma_get_src_port(id_)) : 0;
}

void cm_id::reject(const void* private_data, std::uint8_t length) {
    errno = 0;
    if (rdma_reject(id_, private_data, length) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_reject");
}

void cm_id::cancel() {
    if (!id_)
        return;
    // A probe that looks like an event of this id; it owns no ack.
    rdma_cm_event raw{};
    raw.id = id_;
    cm_event probe(&raw);
    channel_->dispatcher->cancel_accepting(probe);
    probe.release();
}

void cm_id::close() noexcept {
    if (!id_)
        return;
    auto& dispatcher = *channel_->dispatcher;
    cancel();
    // From now on the source acks (and rejects) this id's events as it reads
    // them; what was read before leaves the queue here.
    dispatcher.with_source([&](detail::cm_event_source& s) { s.discard_events_of(id_); });
    dispatcher.drain_now();
    std::deque<cm_event> mine;
    dispatcher.with_source_and_queue([&](detail::cm_event_source&, std::deque<cm_event>& queue) {
        for (auto it = queue.begin(); it != queue.end();) {
            if (detail::cm_id_match{id_}(*it)) {
                mine.push_back(std::move(*it));
                it = queue.erase(it);
            } else {
                ++it;
            }
        }
    });
    for (cm_event& ev : mine) {
        if (ev.listen_id() == id_)
            detail::drop_connect_request(ev);
        ev.ack();
    }
    if (id_->qp != nullptr)
        rdma_destroy_qp(id_);
    rdma_destroy_id(id_);
    dispatcher.with_source([&](detail::cm_event_source& s) { s.stop_discarding(id_); });
    id_ = nullptr;
    channel_.reset();
}

} // namespace rdma_asio
