#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/device_failure.hpp"

namespace rdma_asio {
namespace detail {
namespace {

async_event_source::options options_for(ibv_context* ctx, int port_count) {
    async_event_source::options opts;
    opts.node_name = ctx->device->dev_name;
    opts.port_count = port_count;
    return opts;
}

} // namespace

std::shared_ptr<async_event_stream_impl>
open_async_event_stream(const asio::any_io_executor& ex, const context& ctx, error_code& ec) {
    if (!ctx.is_open()) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    return async_event_stream_impl::open(ex, ctx.native_handle(),
                                         options_for(ctx.native_handle(), ctx.port_count()),
                                         ctx.share(), ec);
}

std::shared_ptr<async_event_stream_impl> open_async_event_stream(const asio::any_io_executor& ex,
                                                                 ibv_context* ctx, error_code& ec) {
    if (ctx == nullptr) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    ibv_device_attr attr{};
    if (int rc = ibv_query_device(ctx, &attr); rc != 0) {
        ec = errno_code(rc);
        return nullptr;
    }
    return async_event_stream_impl::open(ex, ctx, options_for(ctx, attr.phys_port_cnt), nullptr,
                                         ec);
}

std::shared_ptr<async_event_stream_impl>
async_event_stream_impl::open(const asio::any_io_executor& ex, ibv_context* ctx,
                              async_event_source::options opts, std::shared_ptr<ibv_context> device,
                              error_code& ec) {
    opts.failures = device_failures_of(ex);
    auto impl =
        std::make_shared<async_event_stream_impl>(ex, ctx, std::move(opts), std::move(device));
    impl->dispatcher_->open(ec);
    if (ec)
        return nullptr;
    return impl;
}

async_event_stream_impl::async_event_stream_impl(const asio::any_io_executor& ex, ibv_context* ctx,
                                                 async_event_source::options opts,
                                                 std::shared_ptr<ibv_context> device)
    : dispatcher_state(ctx->async_fd, ex, ctx, std::move(opts)), device_(std::move(device)) {}

void async_event_stream_impl::close() noexcept {
    // Unregister the async_fd and restore its flags while it is still ours; the
    // device goes after.
    dispatcher_->close();
    device_.reset();
}

std::optional<port_state> async_event_stream_impl::port(int port_num) const {
    return dispatcher_->with_source([&](const async_event_source& s) {
        const port_state* p = s.port(port_num);
        return p ? std::optional<port_state>(*p) : std::nullopt;
    });
}

bool async_event_stream_impl::removed() const {
    return dispatcher_->with_source([](const async_event_source& s) { return s.removed(); });
}

bool async_event_stream_impl::watching_removal() const {
    return dispatcher_->with_source(
        [](const async_event_source& s) { return s.watching_removal(); });
}

std::size_t async_event_stream_impl::queued() const {
    return dispatcher_->queued();
}

} // namespace detail

teardown_guard::teardown_guard(std::shared_ptr<impl_type> impl, const void* object)
    : impl_(std::move(impl)), object_(object) {
    // ibv_destroy_* waits only for events that were read: the stream reads what the
    // kernel has queued now and acks the object's share of it, and from then on
    // acks the object's events as it reads them.
    acked_ = impl_->retire(object_).discarded;
}

teardown_guard::teardown_guard(teardown_guard&& other) noexcept
    : impl_(std::move(other.impl_)), object_(other.object_), acked_(other.acked_) {}

teardown_guard::~teardown_guard() {
    if (impl_)
        impl_->end_retirement(object_);
}

} // namespace rdma_asio
