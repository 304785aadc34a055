// Events that an rdma_cm wait took from the dispatcher and that its operation has
// not delivered yet (its last step is queued on the user's executor).
//
// librdmacm's rdma_destroy_id waits until every event of the id is acked. An event
// inside a completion queued on an executor that does not run would make closing
// the id wait for ever; parked here instead, closing the id (or destroying the
// channel) finds it and acks it, and the operation completes later with
// operation_aborted.
#pragma once

#include "rdma_asio/cm_event.hpp"

#include <rdma/rdma_cma.h>

#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

/// The outcome of one wait: an error, or an event.
struct cm_held {
    std::error_code ec;
    cm_event ev;
};

class cm_held_events {
public:
    cm_held_events() = default;
    cm_held_events(const cm_held_events&) = delete;
    cm_held_events& operator=(const cm_held_events&) = delete;

    /// Stores a wait's outcome in `slot`; an event stays reachable by begin_close().
    void put(const std::shared_ptr<cm_held>& slot, std::error_code ec, cm_event ev);
    /// The outcome stored in `slot`. If begin_close() took its event meanwhile, the
    /// event is empty and the error operation_aborted.
    cm_held take(const std::shared_ptr<cm_held>& slot);
    /// Removes the parked events of `id` (its own and its connection requests)
    /// and, until end_close(id), refuses to park more: put() then drops them
    /// (acks, rejects a request) and stores operation_aborted. No event of the
    /// id can slip between this sweep and rdma_destroy_id.
    std::vector<cm_event> begin_close(const rdma_cm_id* id);
    void end_close(const rdma_cm_id* id);
    /// Removes every parked event.
    std::vector<cm_event> take_all();

private:
    std::mutex mutex_;
    std::vector<std::shared_ptr<cm_held>> parked_;
    std::vector<const rdma_cm_id*> closing_;
};

} // namespace rdma_asio::detail
