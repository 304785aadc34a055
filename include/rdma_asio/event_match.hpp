// A predicate that selects asynchronous events by type, object or port.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/event_type.hpp"

#include <infiniband/verbs.h>

namespace rdma_asio {

/// A predicate for async_event_stream::async_next: accepts events of one type,
/// optionally about one object or one port. An empty event matches nothing.
class event_match {
public:
    explicit event_match(event_type type) noexcept : type_(type) {}
    event_match(event_type type, const ibv_cq* cq) noexcept : type_(type), object_(cq) {}
    event_match(event_type type, const ibv_qp* qp) noexcept : type_(type), object_(qp) {}
    event_match(event_type type, const ibv_srq* srq) noexcept : type_(type), object_(srq) {}
    event_match(event_type type, const ibv_wq* wq) noexcept : type_(type), object_(wq) {}
    /// Port events (and subnet events) of one port.
    static event_match port(event_type type, int port_num) noexcept {
        event_match m(type);
        m.port_ = port_num;
        return m;
    }

    bool operator()(const async_event& ev) const noexcept {
        // An empty event has no type: no match.
        return ev && ev.type() == type_ && (object_ == nullptr || ev.object() == object_) &&
               (port_ == 0 || ev.port_num() == port_);
    }

private:
    event_type type_;
    const void* object_ = nullptr;
    int port_ = 0;
};

} // namespace rdma_asio
