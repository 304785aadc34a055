// The connection steps of cm_id: which librdmacm call a step makes (copied, so
// deferred operations own their arguments) and the composed operations that
// make the call and wait for the id's answering event.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/detail/cm_event_source.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/post.hpp>

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <system_error>

namespace rdma_asio::detail {

class cm_call {
public:
    static cm_call resolve_addr(const sockaddr* src, const sockaddr* dst,
                                std::chrono::milliseconds timeout) noexcept;
    static cm_call resolve_route(std::chrono::milliseconds timeout) noexcept;
    static cm_call connect(const rdma_conn_param& param) noexcept;
    static cm_call accept(const rdma_conn_param& param) noexcept;
    static cm_call disconnect() noexcept;

    /// Makes the call: 0, or -1 with errno set.
    int operator()(rdma_cm_id* id) noexcept;

private:
    enum class kind { resolve_addr, resolve_route, connect, accept, disconnect };
    static cm_call with_param(kind k, const rdma_conn_param& param) noexcept;

    kind kind_ = kind::disconnect;
    sockaddr_storage src_{};
    sockaddr_storage dst_{};
    bool has_src_ = false;
    int timeout_ms_ = 0;
    rdma_conn_param param_{};
    std::array<std::uint8_t, 256> private_data_{};
};

/// Make the call, then wait for the id's next event and compare it with `expected`.
struct cm_step_op {
    std::shared_ptr<cm_channel_impl> channel;
    rdma_cm_id* id;
    cm_call call;
    rdma_cm_event_type expected;
    bool started = false;
    std::error_code failure;

    template <class Self>
    void operator()(Self& self) {
        if (started)
            return self.complete(failure); // the call failed; reported via post
        started = true;
        self.reset_cancellation_state(asio::enable_total_cancellation());
        errno = 0;
        if (call(id) != 0) {
            failure = last_errno_code();
            return asio::post(std::move(self));
        }
        channel->dispatcher->async_next(cm_id_match{id}, std::move(self));
    }

    template <class Self>
    void operator()(Self& self, std::error_code ec, cm_event ev) {
        if (!ec)
            ec = error_of(ev, expected);
        ev.ack(); // before the handler, which may destroy the id
        self.complete(ec);
    }
};

/// Wait for a CONNECT_REQUEST of a listening id and adopt its new id.
template <class CmId>
struct cm_request_op {
    std::shared_ptr<cm_channel_impl> channel;
    rdma_cm_id* listener;
    asio::any_io_executor ex;

    template <class Self>
    void operator()(Self& self) {
        self.reset_cancellation_state(asio::enable_total_cancellation());
        channel->dispatcher->async_next(cm_id_match{listener}, std::move(self));
    }

    template <class Self>
    void operator()(Self& self, std::error_code ec, cm_event ev) {
        if (!ec)
            ec = error_of(ev, RDMA_CM_EVENT_CONNECT_REQUEST);
        if (ec)
            return self.complete(ec, CmId{});
        CmId request(channel, ev.id(), ex);
        ev.ack();
        self.complete(ec, std::move(request));
    }
};

} // namespace rdma_asio::detail
