#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/detail/device_failure.hpp"
#include "rdma_asio/detail/throw_error.hpp"

namespace rdma_asio {
namespace detail {

channel_impl::channel_impl(const asio::any_io_executor& ex, ibv_context* ctx,
                           std::shared_ptr<ibv_context> shared_device)
    : device(std::move(shared_device)) {
    errno = 0;
    channel = ibv_create_comp_channel(ctx);
    if (channel == nullptr)
        throw_error(last_errno_code(), "ibv_create_comp_channel");
    dispatcher = std::make_shared<event_dispatcher<completion_channel_source>>(
        ex, channel, device_removal_watch("/dev/infiniband", ctx->device->dev_name));
    std::error_code ec;
    dispatcher->open(ec);
    if (ec) {
        dispatcher.reset();
        ibv_destroy_comp_channel(channel);
        throw_error(ec, "rdma_asio::completion_channel: registering the channel fd");
    }
    // A DEVICE_FATAL (or a failing async_fd) read by the context's event stream
    // ends this channel's waits too.
    watch_device_failure(ctx, dispatcher);
}

channel_impl::~channel_impl() {
    // Unregister (and restore) the fd before libibverbs closes it.
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

void channel_impl::keep_until_destroyed(std::shared_ptr<const void> owner, cq_shared_state* state) {
    std::lock_guard lock(mutex_);
    undestroyed_.push_back({std::move(owner), state});
}

} // namespace detail

completion_channel::completion_channel(const executor_type& ex, const context& ctx)
    : completion_channel(ex, ctx.native_handle(), ctx.share()) {}

completion_channel::completion_channel(const executor_type& ex, ibv_context* verbs)
    : completion_channel(ex, verbs, nullptr) {}

completion_channel::completion_channel(const executor_type& ex, ibv_context* verbs,
                                       std::shared_ptr<ibv_context> device)
    : ex_(ex), ctx_(verbs) {
    if (ctx_ == nullptr)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::completion_channel");
    impl_ = std::make_shared<detail::channel_impl>(ex, ctx_, std::move(device));
}

void completion_channel::cancel() {
    if (impl_)
        impl_->dispatcher->cancel();
}

channel_counters completion_channel::counters() const {
    if (!impl_)
        return {};
    return impl_->dispatcher->with_source(
        [](const detail::completion_channel_source& s) { return channel_counters{s.events()}; });
}

bool completion_channel::watching_removal() const {
    if (!impl_)
        return false;
    return impl_->dispatcher->with_source(
        [](const detail::completion_channel_source& s) { return s.watching_removal(); });
}

} // namespace rdma_asio
