// The state of a completion channel, shared by the completion_channel object and
// every completion_queue on it (non-template, see src/cq/completion_channel.cpp).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"
#include "rdma_asio/detail/cq/cq_ack_counter.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

class completion_queue_impl;

/// What outlives a channel whose CQs could not all be destroyed when it went:
/// ibv_destroy_comp_channel refuses a channel a CQ still uses, so the channel is
/// destroyed, with the device kept open, after the last of those CQs.
struct comp_channel_remnant {
    comp_channel_remnant(std::shared_ptr<ibv_context> dev, ibv_comp_channel* ch) noexcept
        : device(std::move(dev)), channel(ch) {}
    comp_channel_remnant(const comp_channel_remnant&) = delete;
    comp_channel_remnant& operator=(const comp_channel_remnant&) = delete;
    ~comp_channel_remnant() { ibv_destroy_comp_channel(channel); }

    std::shared_ptr<ibv_context> device;
    ibv_comp_channel* channel;
};

/// What a channel and its CQs share; the ibv_comp_channel is destroyed with the
/// last of them.
struct completion_channel_impl {
    using native_handle_type = ibv_comp_channel*;
    static constexpr native_handle_type no_handle = nullptr;
    using dispatcher_type = event_dispatcher<completion_channel_source>;

    /// ibv_create_comp_channel on `ctx` and the registration of its fd with the
    /// executor's reactor. `device`: shared ownership of the device when the
    /// channel is made from a context (empty for a raw ibv_context). Null with
    /// `ec` set on failure (bad_descriptor for a null `ctx`).
    static std::shared_ptr<completion_channel_impl> open(const asio::any_io_executor& ex,
                                                         ibv_context* ctx,
                                                         std::shared_ptr<ibv_context> device,
                                                         error_code& ec);

    /// Takes `channel`, made on `device` (or on a context owned elsewhere).
    completion_channel_impl(std::shared_ptr<ibv_context> device, ibv_comp_channel* channel) noexcept
        : device(std::move(device)), channel(channel) {}
    ~completion_channel_impl();
    completion_channel_impl(const completion_channel_impl&) = delete;
    completion_channel_impl& operator=(const completion_channel_impl&) = delete;

    native_handle_type native_handle() const noexcept { return channel; }
    /// Completes every pending wait of every CQ on the channel with operation_aborted.
    void cancel() noexcept { dispatcher->cancel(); }
    /// The channel object lets go: its CQs' waits are cancelled, and the channel
    /// lives on while a CQ holds it.
    void close() noexcept { cancel(); }

    std::uint64_t events() const;
    bool watching_removal() const;

    /// Keeps the state of a CQ whose ibv_destroy_cq failed (a QP still uses it)
    /// until the channel goes: the CQ can still raise events, whose cq_context
    /// points into the state. The channel acks them and retries the destroy first;
    /// a CQ that a QP still uses then is destroyed by its state when the last
    /// holder lets go of it (a queue pair on it holds it until its QP is
    /// destroyed), and the ibv_comp_channel after the last such CQ.
    void keep_until_destroyed(std::shared_ptr<completion_queue_impl> cq);

    // First member, so destroyed last: after ibv_destroy_comp_channel.
    std::shared_ptr<ibv_context> device;
    ibv_comp_channel* channel = nullptr;
    std::shared_ptr<dispatcher_type> dispatcher;

private:
    std::mutex mutex_;
    std::vector<std::shared_ptr<completion_queue_impl>> undestroyed_;
};

} // namespace rdma_asio::detail
