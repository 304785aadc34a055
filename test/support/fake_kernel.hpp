// An imitation of the kernel side of a device's async_fd, for unit tests on hosts
// without RDMA. It behaves as uverbs documents: each read returns one
// struct ib_uverbs_async_event_desc, EAGAIN when empty (O_NONBLOCK), and EIO once
// the event queue is closed (the device was disassociated). libibverbs' own
// ibv_ack_async_event works on the fake CQ/QP objects, so acks are counted by the
// real code.
#pragma once

#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/detail/async_event/async_event_source.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace rdma_asio::test {

/// What ibv_get_async_event fills in for an event of `type` (element left zero).
inline ibv_async_event raw_event(ibv_event_type type) {
    ibv_async_event raw{};
    raw.event_type = type;
    return raw;
}

class fake_async_fd {
public:
    fake_async_fd();
    ~fake_async_fd();
    fake_async_fd(const fake_async_fd&) = delete;
    fake_async_fd& operator=(const fake_async_fd&) = delete;

    ibv_context* context() noexcept { return &ctx_; }
    /// Queues one event, as the kernel would.
    void raise(ibv_event_type type, std::uint64_t element);
    void raise(ibv_event_type type, const void* object) {
        raise(type, reinterpret_cast<std::uintptr_t>(object));
    }
    /// Closes the kernel's side: reads fail with EIO from now on.
    void disassociate();

    /// The source's options for this imitation, with the device node in a
    /// private directory that remove_node() deletes.
    detail::async_event_source::options options() const;

    /// A stream opened on this imitation (through the library's test access);
    /// throws rdma_asio::system_error as async_event_stream::open does.
    template <class Stream = async_event_stream>
    Stream stream(const typename Stream::executor_type& ex) {
        Stream s(ex);
        rdma_asio::error_code ec;
        auto impl = detail::async_event_stream_impl::open(ex, context(), options(), nullptr, ec);
        detail::throw_if_error(ec, "rdma_asio::async_event_stream::open: registering the async_fd");
        detail::io_object_access::adopt(s, std::move(impl));
        return s;
    }
    void remove_node();

private:
    ibv_context ctx_{};
    int write_fd_ = -1;
    std::filesystem::path dir_;
};

/// A CQ/QP that libibverbs' ibv_ack_async_event can count acks on.
struct fake_cq {
    fake_cq();
    ~fake_cq();
    std::uint32_t acks() const { return cq.async_events_completed; }
    ibv_cq cq{};
};
struct fake_qp {
    fake_qp();
    ~fake_qp();
    std::uint32_t acks() const { return qp.events_completed; }
    ibv_qp qp{};
};

} // namespace rdma_asio::test
