// The event source behind cm_event_channel: rdma_get_cm_event() on the channel's
// fd, which librdmacm answers with EAGAIN once the fd is non-blocking.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/core/read_loop.hpp"

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstddef>

namespace rdma_asio::detail {

/// Events of one id (or, for CONNECT_REQUEST, of its listening id).
struct cm_id_match {
    const rdma_cm_id* id;
    bool operator()(const cm_event& ev) const noexcept {
        return ev.id() == id || ev.listen_id() == id;
    }
    const void* key() const noexcept { return id; }
};

/// Rejects and destroys the new id of a CONNECT_REQUEST nobody will take; acks.
void drop_connect_request(cm_event& ev) noexcept;

class cm_event_source {
public:
    using value_type = cm_event;

    explicit cm_event_source(rdma_event_channel* channel) noexcept : channel_(channel) {}

    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept { return channel_->fd; }

    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        read_until_would_block<cm_event>(sink, [this](cm_event& ev) noexcept {
            rdma_cm_event* raw = nullptr;
            errno = 0;
            if (rdma_get_cm_event(channel_, &raw) != 0)
                return read_result::from_errno(errno);
            ev = cm_event(raw);
            return read_result::event();
        });
    }
    void close() noexcept {}

    /// The events of an id, and the connection requests of a listening id.
    static bool concerns(const cm_event& ev, const void* id) noexcept {
        return cm_id_match{static_cast<const rdma_cm_id*>(id)}(ev);
    }
    /// An event of an id being destroyed (or of any id, `id` null, when the
    /// channel closes): acked; a connection request to it is rejected and its
    /// new id destroyed first, so that neither rdma_destroy_id nor
    /// rdma_destroy_event_channel waits for it.
    static void discard(cm_event&& ev, const void* id) noexcept {
        cm_event dropped(std::move(ev));
        if (dropped.listen_id() != nullptr && (id == nullptr || dropped.listen_id() == id))
            drop_connect_request(dropped);
        // else: dropped acks on its way out
    }

    /// rdma_destroy_id waits for the ack of every event of the id that was read:
    /// an event handed to a handler that has not run yet stays reachable by
    /// retire and close.
    static constexpr bool hold_taken_events = true;

private:
    rdma_event_channel* channel_;
};

} // namespace rdma_asio::detail
