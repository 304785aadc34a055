#include "rdma_asio/subnet_event_client.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <asio/post.hpp>

#include <cerrno>
#include <utility>

namespace rdma_asio {
namespace {

detail::sa_subscriber::config config_of(const subnet_event_client::options& opts) {
    detail::sa_subscriber::config cfg;
    cfg.timeout = opts.timeout;
    cfg.retries = opts.retries;
    cfg.resp_time_value = opts.resp_time_value;
    return cfg;
}

const char* checked_ca_name(const context& ctx) {
    if (!ctx.is_open())
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::subnet_event_client");
    return ctx.device_name().c_str();
}

} // namespace

subnet_event_client::subnet_event_client(async_event_stream& stream, const context& ctx, int port,
                                         const options& opts)
    : subnet_event_client(stream, std::string_view(checked_ca_name(ctx)), port, opts) {}

subnet_event_client::subnet_event_client(async_event_stream& stream, std::string_view ca_name,
                                         int port, const options& opts)
    : subnet_event_client(stream.get_executor(), ca_name, port, opts) {
    std::shared_ptr<detail::async_event_stream_impl::dispatcher_type> events =
        stream.impl_ ? stream.impl_->shared_dispatcher() : nullptr;
    if (!events)
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::subnet_event_client: the stream is not open");
    impl_->deliver_to([events](async_event&& ev) { return events->inject(std::move(ev)); });
    // SM_CHANGE and CLIENT_REREGISTER arrive on the stream; they are seen there
    // under the stream's lock, so the client reacts from its own executor.
    std::weak_ptr<detail::subnet_client_impl> weak = impl_;
    const std::uint64_t id = events->with_source([&](detail::async_event_source& s) {
        return s.add_port_observer([weak, ex = ex_](event_type type, int port_num) {
            asio::post(ex, [weak, type, port_num] {
                if (auto impl = weak.lock())
                    impl->on_port_event(type, port_num);
            });
        });
    });
    impl_->on_close([events, id] {
        events->with_source([&](detail::async_event_source& s) { s.remove_port_observer(id); });
    });
}

subnet_event_client::subnet_event_client(const executor_type& ex, std::string_view ca_name,
                                         int port, const options& opts)
    : ex_(ex), impl_(std::make_shared<detail::subnet_client_impl>(ex, config_of(opts))) {
    impl_->open(std::string(ca_name), port);
}

subnet_event_client::subnet_event_client(subnet_event_client&& other) noexcept
    : ex_(other.ex_), impl_(std::move(other.impl_)) {}

subnet_event_client& subnet_event_client::operator=(subnet_event_client&& other) noexcept {
    if (this != &other) {
        close();
        ex_ = other.ex_;
        impl_ = std::move(other.impl_);
    }
    return *this;
}

subnet_event_client::~subnet_event_client() {
    close();
}

const subnet_event_client::impl_ptr& subnet_event_client::checked_impl() const {
    if (!impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::subnet_event_client: not open");
    return impl_;
}

int subnet_event_client::native_handle() const noexcept {
    return impl_ ? impl_->fd() : -1;
}

umad_delivery subnet_event_client::delivery() const {
    return checked_impl()->uses_reader_thread() ? umad_delivery::reader_thread
                                                : umad_delivery::reactor;
}

sm_event_counters subnet_event_client::counters() const {
    return checked_impl()->counters();
}

bool subnet_event_client::subscribed(std::uint16_t trap) const {
    return checked_impl()->subscribed(trap);
}

void subnet_event_client::resubscribe() {
    checked_impl()->resubscribe();
}

void subnet_event_client::cancel() {
    if (impl_)
        impl_->cancel();
}

void subnet_event_client::close() noexcept {
    if (impl_) {
        impl_->close();
        impl_.reset();
    }
}

} // namespace rdma_asio
