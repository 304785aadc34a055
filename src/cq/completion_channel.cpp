#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/cq/device_failure.hpp"

#include <new>

namespace rdma_asio::detail {

std::shared_ptr<completion_channel_impl>
completion_channel_impl::open(const asio::any_io_executor& ex, ibv_context* ctx,
                              std::shared_ptr<ibv_context> device, error_code& ec) {
    if (ctx == nullptr) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    errno = 0;
    ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
    if (channel == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    // From here the channel is the impl's: its destructor destroys it.
    auto impl = std::make_shared<completion_channel_impl>(std::move(device), channel);
    impl->dispatcher = std::make_shared<dispatcher_type>(
        ex, channel, device_removal_watch("/dev/infiniband", ctx->device->dev_name));
    impl->dispatcher->open(ec);
    if (ec)
        return nullptr;
    // A DEVICE_FATAL (or a failing async_fd) read by an event stream of the
    // device on this execution context ends this channel's waits too.
    device_failures_of(ex)->watch(ctx, impl->dispatcher);
    ec.clear();
    return impl;
}

completion_channel_impl::~completion_channel_impl() {
    // Unregister (and restore) the fd before libibverbs closes it.
    if (dispatcher)
        dispatcher->close();
    // No drain runs any more: ack what was read for the CQs whose destroy failed
    // earlier and try again. A CQ that a QP still uses is destroyed by its state
    // when that goes (the queue pair on it holds it until the QP is destroyed),
    // and the channel after it (ibv_destroy_comp_channel fails while a CQ uses
    // it). Only ibv_get_cq_event on this channel, which nobody calls any more,
    // hands out a CQ's cq_context, so its state may go whenever its holders let go.
    std::shared_ptr<comp_channel_remnant> remnant;
    for (auto& cq : undestroyed_) {
        if (cq->destroy_now())
            continue;
        if (!remnant) {
            try {
                remnant = std::make_shared<comp_channel_remnant>(std::move(device), channel);
            } catch (const std::bad_alloc&) {
                return; // no memory: these CQs and the channel stay until the process ends
            }
        }
        cq->destroy_when_gone(remnant);
    }
    if (!remnant)
        ibv_destroy_comp_channel(channel);
}

std::uint64_t completion_channel_impl::events() const {
    return dispatcher->with_source([](const completion_channel_source& s) { return s.events(); });
}

bool completion_channel_impl::watching_removal() const {
    return dispatcher->with_source(
        [](const completion_channel_source& s) { return s.watching_removal(); });
}

void completion_channel_impl::keep_until_destroyed(std::shared_ptr<completion_queue_impl> cq) {
    std::lock_guard lock(mutex_);
    undestroyed_.push_back(std::move(cq));
}

} // namespace rdma_asio::detail

namespace rdma_asio::detail {

std::shared_ptr<completion_channel_impl>
open_completion_channel(const asio::any_io_executor& ex, const context& ctx, error_code& ec) {
    if (!ctx.is_open()) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    return completion_channel_impl::open(ex, ctx.native_handle(), ctx.share(), ec);
}

std::shared_ptr<completion_channel_impl> open_completion_channel(const asio::any_io_executor& ex,
                                                                 ibv_context* ctx, error_code& ec) {
    return completion_channel_impl::open(ex, ctx, nullptr, ec);
}

} // namespace rdma_asio::detail
