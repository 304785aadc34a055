// The event source behind cm_event_channel: rdma_get_cm_event() on the channel's
// fd, which librdmacm answers with EAGAIN once the fd is non-blocking.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <vector>

namespace rdma_asio::detail {

/// Events of one id (or, for CONNECT_REQUEST, of its listening id).
struct cm_id_match {
    const rdma_cm_id* id;
    bool operator()(const cm_event& ev) const noexcept {
        return ev.id() == id || ev.listen_id() == id;
    }
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
        while (sink.more()) {
            rdma_cm_event* raw = nullptr;
            errno = 0;
            if (rdma_get_cm_event(channel_, &raw) != 0) {
                const int e = errno;
                if (e == EAGAIN || e == EWOULDBLOCK)
                    return;
                if (e == EINTR)
                    continue;
                sink.fail(errno_code(e != 0 ? e : EIO));
                return;
            }
            cm_event ev(raw);
            if (discarding(ev.listen_id()))
                drop_connect_request(ev);
            else if (!discarding(ev.id()))
                sink.push(std::move(ev));
            // else: an id being destroyed; ev acks on its way out
        }
    }
    void close() noexcept {}

    /// Events of `id` read from now on are acked and dropped (its connection
    /// requests rejected), so that rdma_destroy_id never waits for an ack.
    void discard_events_of(const rdma_cm_id* id) { discarding_.push_back(id); }
    void stop_discarding(const rdma_cm_id* id) noexcept {
        discarding_.erase(std::remove(discarding_.begin(), discarding_.end(), id),
                          discarding_.end());
    }

private:
    bool discarding(const rdma_cm_id* id) const noexcept {
        return id != nullptr &&
               std::find(discarding_.begin(), discarding_.end(), id) != discarding_.end();
    }

    rdma_event_channel* channel_;
    std::vector<const rdma_cm_id*> discarding_;
};

} // namespace rdma_asio::detail
