// The event source behind async_event_stream: the device's async_fd, plus an
// inotify watch on the device's uverbs node, whose deletion is how soft-RoCE (and
// any driver without DEVICE_FATAL) shows that the device is going away.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/core/read_loop.hpp"
#include "rdma_asio/detail/device/device_removal_watch.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/port_state.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rdma_asio::detail {

class device_failures;

class async_event_source {
public:
    using value_type = async_event;
    using get_event_fn = int (*)(ibv_context*, ibv_async_event*);

    struct options {
        /// ibv_get_async_event; replaceable only so unit tests can imitate the kernel.
        get_event_fn get_event = &ibv_get_async_event;
        /// Where the uverbs node lives, and its name (ibv_device::dev_name).
        std::string device_dir = "/dev/infiniband";
        std::string node_name;
        /// Ports whose state is cached; 0 caches none.
        int port_count = 0;
        /// The completion channels told when the device fails (those of the
        /// stream's execution context); none when empty.
        std::shared_ptr<device_failures> failures;
    };

    async_event_source(ibv_context* ctx, options opts);
    async_event_source(const async_event_source&) = delete;
    async_event_source& operator=(const async_event_source&) = delete;
    ~async_event_source() { close(); }

    // fd 1: the removal watch (device_removal_watch.hpp).
    std::size_t fd_count() const noexcept { return removal_watch_.fd_count(); }
    int native_handle(std::size_t i) const noexcept {
        return removal_watch_.fd_after(ctx_->async_fd, i);
    }
    bool drain_on_arm(std::size_t i) const noexcept { return removal_watch_.drain_on_arm(i); }

    template <class Sink>
    void drain(std::size_t i, Sink& sink) noexcept {
        read_until_would_block<async_event>(sink, [this, i](async_event& ev) noexcept {
            return i == 0 ? read_async_fd(ev) : read_inotify(ev);
        });
    }

    void close() noexcept;

    /// ibv_destroy_cq/qp/srq/wq wait for the ack of every event of the object that
    /// was read: an event handed to a handler that has not run yet stays
    /// reachable by teardown and close.
    static constexpr bool hold_taken_events = true;

    /// Whether `ev` concerns `object` (a CQ, QP, SRQ or WQ being destroyed).
    static bool concerns(const async_event& ev, const void* object) noexcept {
        return ev.object() == object;
    }

    // State kept while draining; read under the dispatcher's lock.
    const port_state* port(int port_num) const noexcept;
    bool removed() const noexcept { return removed_; }
    bool watching_removal() const noexcept { return removal_watch_.active(); }
    std::uint64_t events_read() const noexcept { return events_read_; }

    /// Observers run for the events read, under the dispatcher's lock: they must
    /// not block or call back into the stream (post instead). Each add returns an
    /// id for remove_observer.
    /// A port observer: called for every port event.
    using port_observer = std::function<void(event_type, int port_num)>;
    std::uint64_t add_port_observer(port_observer observer);
    /// An object observer: called for every event of `object` (an ibv_qp*,
    /// ibv_cq*, ibv_srq* or ibv_wq*).
    using object_observer = std::function<void(event_type)>;
    std::uint64_t add_object_observer(const void* object, object_observer observer);
    void remove_observer(std::uint64_t id) noexcept;

private:
    read_result read_async_fd(async_event& ev) noexcept;
    read_result read_inotify(async_event& ev) noexcept;
    // The removal event, once: delivered as an event, then every other wait fails.
    read_result removal(async_event& ev, event_type type) noexcept;
    void announce_failure() noexcept;
    void refresh_port(int port_num, bool with_gids) noexcept;

    ibv_context* ctx_;
    options opts_;
    device_removal_watch removal_watch_;
    bool removed_ = false;
    std::uint64_t events_read_ = 0;
    std::vector<port_state> ports_;
    struct observer_entry {
        std::uint64_t id;
        const void* object; // null: a port observer
        port_observer on_port;
        object_observer on_object;
    };
    void notify(const async_event& ev) noexcept;
    std::vector<observer_entry> observers_;
    std::uint64_t next_observer_ = 1;
};

} // namespace rdma_asio::detail
