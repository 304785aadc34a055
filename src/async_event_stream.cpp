#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <asio/error.hpp>

namespace rdma_asio {
namespace {

detail::async_event_source::options options_for(const context& ctx) {
    if (!ctx.is_open())
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::async_event_stream");
    detail::async_event_source::options opts;
    opts.node_name = ctx.native_handle()->device->dev_name;
    opts.port_count = ctx.port_count();
    return opts;
}

} // namespace

async_event_stream::async_event_stream(const executor_type& ex, const context& ctx)
    : async_event_stream(ex, ctx.native_handle(), options_for(ctx)) {
    device_ = ctx.share();
}

async_event_stream::async_event_stream(const executor_type& ex, ibv_context* ctx,
                                       detail::async_event_source::options opts)
    : ex_(ex), fd_(ctx->async_fd), impl_(std::make_shared<impl_type>(ex, ctx, std::move(opts))) {
    std::error_code ec;
    impl_->open(ec);
    detail::throw_if_error(ec, "rdma_asio::async_event_stream: registering async_fd");
}

async_event_stream::async_event_stream(async_event_stream&& other) noexcept
    : ex_(other.ex_), fd_(std::exchange(other.fd_, -1)), impl_(std::move(other.impl_)),
      device_(std::move(other.device_)) {}

async_event_stream& async_event_stream::operator=(async_event_stream&& other) noexcept {
    if (this != &other) {
        close();
        ex_ = std::move(other.ex_);
        fd_ = std::exchange(other.fd_, -1);
        impl_ = std::move(other.impl_);
        device_ = std::move(other.device_);
    }
    return *this;
}

async_event_stream::~async_event_stream() {
    close();
}

async_event_stream::impl_type& async_event_stream::checked_impl() const {
    if (!impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::async_event_stream: not open");
    return *impl_;
}

void async_event_stream::cancel() {
    if (impl_)
        impl_->cancel();
}

void async_event_stream::close() noexcept {
    if (impl_) {
        // Unregister the async_fd and restore its flags while it is still ours.
        impl_->close();
        impl_.reset();
        fd_ = -1;
    }
    device_.reset();
}

std::optional<port_state> async_event_stream::port(int port_num) const {
    return checked_impl().with_source([&](const detail::async_event_source& s) {
        const port_state* p = s.port(port_num);
        return p ? std::optional<port_state>(*p) : std::nullopt;
    });
}

bool async_event_stream::removed() const {
    return checked_impl().with_source(
        [](const detail::async_event_source& s) { return s.removed(); });
}

bool async_event_stream::watching_removal() const {
    return checked_impl().with_source(
        [](const detail::async_event_source& s) { return s.watching_removal(); });
}

std::size_t async_event_stream::queued() const {
    return checked_impl().queued();
}

teardown_guard async_event_stream::teardown(const ibv_cq* cq) {
    return teardown_object(cq);
}
teardown_guard async_event_stream::teardown(const ibv_qp* qp) {
    return teardown_object(qp);
}
teardown_guard async_event_stream::teardown(const ibv_srq* srq) {
    return teardown_object(srq);
}
teardown_guard async_event_stream::teardown(const ibv_wq* wq) {
    return teardown_object(wq);
}

teardown_guard async_event_stream::teardown_object(const void* object) {
    checked_impl();
    return teardown_guard(impl_, object);
}

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
