#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/device_failure.hpp"

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
    // A DEVICE_FATAL (or a failing async_fd) read by the context's event stream
    // ends this channel's waits too.
    watch_device_failure(ctx, impl->dispatcher);
    ec.clear();
    return impl;
}

completion_channel_impl::~completion_channel_impl() {
    // Unregister (and restore) the fd before libibverbs closes it.
    if (dispatcher)
        dispatcher->close();
    // No drain runs any more: ack what was read for the CQs whose destroy failed
    // earlier and try again. A CQ that a QP still uses stays, and so does the
    // channel (ibv_destroy_comp_channel fails while a CQ uses it); its state can be
    // freed all the same, since only ibv_get_cq_event on this channel, which nobody
    // calls any more, hands out its cq_context.
    for (auto& cq : undestroyed_) {
        cq.state->flush();
        ibv_destroy_cq(cq.state->cq);
    }
    ibv_destroy_comp_channel(channel);
}

std::uint64_t completion_channel_impl::events() const {
    return dispatcher->with_source([](const completion_channel_source& s) { return s.events(); });
}

bool completion_channel_impl::watching_removal() const {
    return dispatcher->with_source(
        [](const completion_channel_source& s) { return s.watching_removal(); });
}

void completion_channel_impl::keep_until_destroyed(std::shared_ptr<const void> owner,
                                                   cq_ack_counter* state) {
    std::lock_guard lock(mutex_);
    undestroyed_.push_back({std::move(owner), state});
}

} // namespace rdma_asio::detail

namespace rdma_asio::detail {

std::shared_ptr<completion_channel_impl> open_completion_channel(const asio::any_io_executor& ex,
                                                      const context& ctx, error_code& ec) {
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
