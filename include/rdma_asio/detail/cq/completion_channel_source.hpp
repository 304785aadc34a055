// The event source behind completion_channel: ibv_get_cq_event() on the
// channel's fd. The ack of each event belongs to its CQ: the source counts it on
// the CQ's cq_ack_counter (its cq_context), which acks in batches, under the
// dispatcher's lock.
// A second fd watches the device's uverbs node: when the device goes away, the
// channel itself stays silent, so the deletion of the node is what ends its waits
// (with errc::device_removed), whether or not anyone reads the async events.
#pragma once

#include "rdma_asio/detail/core/read_loop.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/cq_ack_counter.hpp"
#include "rdma_asio/detail/device/device_removal_watch.hpp"
#include "rdma_asio/error.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace rdma_asio::detail {

/// A completion event: which CQ it is for. It owns nothing; the CQ owns the ack.
/// A wait that polled its CQ on a wake-up instead (cq_poll_match::on_wake) gets
/// `polled` completions, already in its span, and no event.
struct cq_event {
    ibv_cq* cq = nullptr;
    std::size_t polled = 0;
};

class completion_channel_source {
public:
    using value_type = cq_event;

    /// `removal_watch`: the device's uverbs node, or an inactive watch.
    completion_channel_source(ibv_comp_channel* channel,
                              device_removal_watch removal_watch = {}) noexcept
        : channel_(channel), removal_watch_(std::move(removal_watch)) {}

    // fd 1: the removal watch (device_removal_watch.hpp).
    std::size_t fd_count() const noexcept { return removal_watch_.fd_count(); }
    int native_handle(std::size_t i) const noexcept {
        return removal_watch_.fd_after(channel_->fd, i);
    }
    // Neither fd is read when its wait starts. The channel's wait starts right
    // after its CQ's reader armed the CQ and polled it empty, so its event can
    // hardly be there yet: reading then found nothing (EAGAIN) for each message,
    // a system call each. What is there is reported by the reactor
    // (event_dispatcher.hpp, "Waking").
    static bool drain_on_arm(std::size_t) noexcept { return false; }

    template <class Sink>
    void drain(std::size_t i, Sink& sink) noexcept {
        if (i == 1) {
            if (removal_watch_.node_deleted())
                sink.fail(make_error_code(errc::device_removed));
            return;
        }
        read_until_would_block<cq_event>(sink, [this](cq_event& ev) noexcept {
            void* context = nullptr;
            errno = 0;
            if (ibv_get_cq_event(channel_, &ev.cq, &context) != 0)
                return read_result::from_errno(errno);
            events_.fetch_add(1, std::memory_order_relaxed);
            static_cast<cq_ack_counter*>(context)->event_got();
            return read_result::event();
        });
    }

    void close() noexcept { removal_watch_.close(); }

    /// Whether `ev` is an event of CQ `cq`.
    static bool concerns(const cq_event& ev, const void* cq) noexcept { return ev.cq == cq; }
    /// The CQ of `ev`: waits are indexed by CQ (see event_dispatcher).
    static const void* object_of(const cq_event& ev) noexcept { return ev.cq; }

    ibv_comp_channel* channel() const noexcept { return channel_; }
    bool watching_removal() const noexcept { return removal_watch_.active(); }
    std::uint64_t events() const noexcept { return events_.load(std::memory_order_relaxed); }

private:
    ibv_comp_channel* channel_;
    device_removal_watch removal_watch_;
    std::atomic<std::uint64_t> events_{0};
};

} // namespace rdma_asio::detail
