// Connection-manager events (rdma_get_cm_event) as owning values.
#pragma once

#include <rdma/rdma_cma.h>

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <string_view>

namespace rdma_asio {

/// One rdma_cm event. It owns the acknowledgement librdmacm requires for every
/// event rdma_get_cm_event() returned: it acks (rdma_ack_cm_event) exactly once,
/// when destroyed or assigned over, or earlier through ack(). rdma_destroy_id
/// waits until every event of the id is acked, and the event's private data and
/// the id of a CONNECT_REQUEST are valid only until then.
///
/// Move-only. A default-constructed or moved-from event is empty: type() and
/// conn_param() throw system_error (EINVAL) naming the call, name() is
/// "none", id(), listen_id() and native_handle() are nullptr, status() 0,
/// needs_ack() false, ack() does nothing.
///
/// The same vocabulary as async_event: operator bool, type(), name() (to_string
/// of the type), needs_ack(), ack(), release(), native_handle().
class cm_event {
public:
    cm_event() noexcept = default;
    /// Takes over the acknowledgement of an event from rdma_get_cm_event().
    explicit cm_event(rdma_cm_event* raw) noexcept : raw_(raw) {}
    cm_event(cm_event&& other) noexcept : raw_(other.raw_) { other.raw_ = nullptr; }
    cm_event& operator=(cm_event&& other) noexcept;
    cm_event(const cm_event&) = delete;
    cm_event& operator=(const cm_event&) = delete;
    ~cm_event() { ack(); }

    explicit operator bool() const noexcept { return raw_ != nullptr; }
    rdma_cm_event_type type() const;
    /// to_string(type()), e.g. "RDMA_CM_EVENT_ESTABLISHED"; "none" for an empty event.
    std::string_view name() const noexcept;
    /// The id the event is about (for CONNECT_REQUEST: the new id).
    rdma_cm_id* id() const noexcept { return raw_ ? raw_->id : nullptr; }
    /// The listening id of a CONNECT_REQUEST, else nullptr.
    rdma_cm_id* listen_id() const noexcept { return raw_ ? raw_->listen_id : nullptr; }
    /// The event's status: 0, a negative errno, or a reject reason (REJECTED).
    int status() const noexcept { return raw_ ? raw_->status : 0; }
    const rdma_conn_param& conn_param() const;

    /// True while the acknowledgement is still owed: every non-empty cm_event owes it.
    bool needs_ack() const noexcept { return raw_ != nullptr; }
    /// Acknowledges now (rdma_ack_cm_event); later calls do nothing. The event is
    /// empty afterwards: librdmacm frees it on the ack.
    void ack() noexcept;
    /// Gives up the acknowledgement: the caller must rdma_ack_cm_event() the
    /// result. The event is empty afterwards (the result is the event itself).
    rdma_cm_event* release() noexcept {
        rdma_cm_event* raw = raw_;
        raw_ = nullptr;
        return raw;
    }
    /// The event as librdmacm returned it; valid until it is acked. nullptr for an
    /// empty event.
    rdma_cm_event* native_handle() const noexcept { return raw_; }

private:
    rdma_cm_event* raw_ = nullptr;
};

/// rdma_event_str(type), e.g. "RDMA_CM_EVENT_ESTABLISHED".
std::string_view to_string(rdma_cm_event_type type) noexcept;

/// The error an event means when a step expected `expected` and got `ev`: empty
/// when ev is `expected`; errc::connection_rejected, peer_unreachable,
/// address_error, route_error, connect_error, disconnected, device_removed,
/// unexpected_cm_event; or ETIMEDOUT when the event's status says so;
/// EINVAL for an empty event.
error_code error_of(const cm_event& ev, rdma_cm_event_type expected) noexcept;

} // namespace rdma_asio
