// What an asynchronous event is about: a CQ, a QP, an SRQ, a WQ, a port, the
// device or a GID.
#pragma once

#include "rdma_asio/event_type.hpp"

namespace rdma_asio {

/// What an event is about, i.e. which member of ibv_async_event::element is valid.
enum class event_element { cq, qp, srq, wq, port, device, gid };

/// The element kind of an event type.
event_element element_of(event_type type) noexcept;

} // namespace rdma_asio
