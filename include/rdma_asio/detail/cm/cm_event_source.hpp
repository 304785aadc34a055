// The event source behind cm_event_channel: rdma_get_cm_event() on the channel's
// fd, which librdmacm answers with EAGAIN once the fd is non-blocking.
//
// A listener's backlog: the kernel counts against rdma_listen's backlog only the
// connection requests not read from the channel yet (ucma_get_event gives the
// place back as it hands one over), and the channel reads until EAGAIN. So the
// requests no accept took, kept here for the next one, are counted here: beyond
// the backlog a request is rejected at once (the peer's connect ends with
// RDMA_CM_EVENT_REJECTED), as the kernel would have, instead of kept without
// bound while a burst of connects outruns the accepts.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/core/read_loop.hpp"

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

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

    /// `listener` listens with `backlog` (rdma_listen's, as the kernel takes it:
    /// 0, a negative one or one above net.rdma_ucm.max_backlog is that maximum):
    /// at most that many of its connection requests are kept. Under the
    /// dispatcher's lock (with_source).
    void listening(const rdma_cm_id* listener, int backlog);
    /// `listener` is being destroyed.
    void stopped_listening(const rdma_cm_id* listener) noexcept {
        std::erase_if(backlogs_, [&](const auto& b) { return b.first == listener; });
    }
    /// Whether `ev`, which no wait took, is a connection request beyond its
    /// listener's backlog, with `kept` the events kept now: it is rejected
    /// (discard) instead of kept.
    bool refuses_keeping(const cm_event& ev, const std::deque<cm_event>& kept) const noexcept {
        const rdma_cm_id* listener = ev.listen_id();
        if (listener == nullptr)
            return false;
        const auto b = std::find_if(backlogs_.begin(), backlogs_.end(),
                                    [&](const auto& b) { return b.first == listener; });
        if (b == backlogs_.end())
            return false;
        const auto waiting = std::count_if(
            kept.begin(), kept.end(), [&](const cm_event& k) { return k.listen_id() == listener; });
        return static_cast<std::size_t>(waiting) >= b->second;
    }

    /// rdma_destroy_id waits for the ack of every event of the id that was read:
    /// an event handed to a handler that has not run yet stays reachable by
    /// retire and close.
    static constexpr bool hold_taken_events = true;

private:
    rdma_event_channel* channel_;
    // The listeners on this channel and their backlogs (a channel has few).
    std::vector<std::pair<const rdma_cm_id*, std::size_t>> backlogs_;
};

} // namespace rdma_asio::detail
