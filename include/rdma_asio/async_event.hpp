// Asynchronous events of an RDMA device (ibv_get_async_event) as owning values.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/event_element.hpp"
#include "rdma_asio/event_type.hpp"

#include <infiniband/verbs.h>

#include <string_view>

namespace rdma_asio {

/// One asynchronous event. It owns the acknowledgement that libibverbs requires
/// for every event ibv_get_async_event() returned: it acks exactly once, when
/// destroyed or assigned over, or earlier through ack().
///
/// Ack before destroying the event's object: ibv_destroy_qp/cq/srq/wq wait until
/// every event of that object is acked, so an unacked event in the destroying
/// thread's own scope blocks it for ever.
///
/// Move-only. A default-constructed or moved-from event is empty: type() and
/// element() throw system_error (EINVAL) naming the call, name() is "none",
/// cq(), qp(), srq(), wq(), object() are nullptr, port_num() 0, needs_ack() false,
/// ack() does nothing.
///
/// The same vocabulary as cm_event: operator bool, type(), name() (to_string of
/// the type), needs_ack(), ack(), release(), native_handle().
class async_event {
public:
    async_event() noexcept = default;
    /// Takes over the acknowledgement of an event from ibv_get_async_event().
    explicit async_event(const ibv_async_event& raw) noexcept;
    /// An event that needs no acknowledgement (subnet and removal events).
    async_event(event_type type, int port_num, const ibv_gid& gid) noexcept;

    async_event(async_event&& other) noexcept;
    async_event& operator=(async_event&& other) noexcept;
    async_event(const async_event&) = delete;
    async_event& operator=(const async_event&) = delete;
    ~async_event() { ack(); }

    explicit operator bool() const noexcept { return valid_; }
    event_type type() const;
    /// to_string(type()), e.g. "IBV_EVENT_PORT_ACTIVE"; "none" for an empty event.
    std::string_view name() const noexcept { return valid_ ? to_string(type_) : "none"; }
    /// element_of(type()).
    event_element element() const;

    /// The affected object, or nullptr/0 when the event is about something else.
    ibv_cq* cq() const noexcept;
    ibv_qp* qp() const noexcept;
    ibv_srq* srq() const noexcept;
    ibv_wq* wq() const noexcept;
    /// Port number of a port or subnet event, else 0.
    int port_num() const noexcept;
    /// The GID of a subnet event (port GID or MGID), else all zero.
    const ibv_gid& gid() const noexcept { return gid_; }
    /// The object pointer of a CQ/QP/SRQ/WQ event, else nullptr.
    const void* object() const noexcept;

    /// True while the acknowledgement is still owed.
    bool needs_ack() const noexcept { return owns_ack_; }
    /// Acknowledges now (ibv_ack_async_event); later calls do nothing.
    void ack() noexcept;
    /// Gives up the acknowledgement: the caller must ibv_ack_async_event() the
    /// result. The event keeps its contents (libibverbs copied them into it), so
    /// its accessors still work; needs_ack() is false from then on.
    ibv_async_event release() noexcept;
    /// The event as libibverbs returned it (all zero for an empty event). For a
    /// subnet or removal event only element.port_num is set: its type is type().
    const ibv_async_event& native_handle() const noexcept { return raw_; }

private:
    ibv_async_event raw_{};
    ibv_gid gid_{};
    event_type type_{};
    bool valid_ = false;
    bool owns_ack_ = false;
};

} // namespace rdma_asio
