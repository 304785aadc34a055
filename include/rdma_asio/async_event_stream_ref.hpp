// How events from elsewhere join a device's async_event_stream, and how port
// events read by the stream can be watched.
#pragma once

#include "rdma_asio/async_event.hpp"

#include <cstdint>
#include <functional>
#include <memory>

namespace rdma_asio {

namespace detail {
class async_event_stream_impl;
} // namespace detail

class event_subscription;

/// A reference to the state of an open async_event_stream
/// (basic_async_event_stream::ref()): for a source of events the kernel does not
/// put on the device's async_fd, such as subnet_event_client, and for observers of
/// the stream's events, such as queue_pair::watch_errors.
///
/// It refers to the stream's state, not to the stream object: it stays valid when
/// the stream is moved (also to another executor type), and outlives the stream
/// harmlessly. Once the stream is closed (or opened anew, which makes a new state),
/// deliver() returns false and the observers are no longer called. Copyable and
/// cheap; every member may be called from any thread.
class async_event_stream_ref {
public:
    using port_observer = std::function<void(event_type type, int port_num)>;

    /// Hands `ev` to the stream's waiters exactly like an event read from the
    /// async_fd: to the first pending wait that accepts it, or else kept for the
    /// next one. Returns false, dropping the event (which then acks, if it needs
    /// to), once the stream is closed or its device removed (after the removal
    /// event, every wait fails with errc::device_removed).
    bool deliver(async_event ev) const;

    /// Calls `observer` for every port event the stream reads (port_active,
    /// port_err, lid_change, pkey_change, sm_change, gid_change,
    /// client_reregister), with its type and port, until the returned
    /// subscription ends. The stream reads only while somebody waits on it.
    ///
    /// The observer runs on the thread reading the stream, under the stream's
    /// lock: it must be quick, must not block, and must not call the stream or
    /// end its own subscription (post to an executor instead).
    [[nodiscard]] event_subscription observe_ports(port_observer observer) const;

    using object_observer = std::function<void(event_type type)>;
    /// Calls `observer` for every event the stream reads about `qp` (qp_fatal,
    /// qp_req_err, qp_access_err, comm_est, ...), with its type, until the returned
    /// subscription ends; the event itself still goes to the stream's waiters.
    /// Same rules as observe_ports: the stream reads only while somebody waits on
    /// it, and the observer runs under the stream's lock (post, do not block).
    /// queue_pair::watch_errors is built on it.
    [[nodiscard]] event_subscription observe(const ibv_qp* qp, object_observer observer) const;
    /// As observe(qp, ...), for the events of a CQ (cq_err).
    [[nodiscard]] event_subscription observe(const ibv_cq* cq, object_observer observer) const;

private:
    template <class>
    friend class basic_async_event_stream;
    event_subscription observe_object(const void* object, object_observer observer) const;
    explicit async_event_stream_ref(std::shared_ptr<detail::async_event_stream_impl> impl) noexcept
        : impl_(std::move(impl)) {}

    std::shared_ptr<detail::async_event_stream_impl> impl_;
};

/// An observer of a stream's events (async_event_stream_ref::observe_ports,
/// observe). Move-only. When it ends (destroyed, assigned over, or reset()), the
/// observer is not running and will not be called again. Ending it after the
/// stream closed is harmless.
class event_subscription {
public:
    /// Observes nothing.
    event_subscription() noexcept = default;
    event_subscription(event_subscription&& other) noexcept;
    event_subscription& operator=(event_subscription&& other) noexcept;
    event_subscription(const event_subscription&) = delete;
    event_subscription& operator=(const event_subscription&) = delete;
    ~event_subscription() { reset(); }

    /// Stops the observer now.
    void reset() noexcept;
    /// Whether an observer is registered through this object.
    bool active() const noexcept { return id_ != 0; }

private:
    friend class async_event_stream_ref;
    event_subscription(std::weak_ptr<detail::async_event_stream_impl> impl,
                       std::uint64_t id) noexcept
        : impl_(std::move(impl)), id_(id) {}

    std::weak_ptr<detail::async_event_stream_impl> impl_;
    std::uint64_t id_ = 0;
};

} // namespace rdma_asio
