#include "rdma_asio/subnet_event_client.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <string>

namespace rdma_asio::detail {
namespace {

sa_subscriber::config config_of(const subnet_event_client_options& opts) {
    sa_subscriber::config cfg;
    cfg.timeout = opts.timeout;
    cfg.retries = opts.retries;
    cfg.resp_time_value = opts.resp_time_value;
    return cfg;
}

} // namespace

std::shared_ptr<subnet_client_impl>
open_subnet_event_client(const asio::any_io_executor& ex, std::string_view ca_name, int port,
                         const subnet_event_client_options& opts,
                         const async_event_stream_ref* stream, error_code& ec, std::string& what) {
    ec.clear();
    auto impl = std::make_shared<subnet_client_impl>(ex, config_of(opts));
    impl->open(std::string(ca_name), port, ec, what);
    if (ec)
        return nullptr; // its destructor closes what was opened
    if (stream)
        impl->attach(*stream);
    return impl;
}

std::shared_ptr<subnet_client_impl>
open_subnet_event_client(const asio::any_io_executor& ex, const context& ctx, int port,
                         const subnet_event_client_options& opts,
                         const async_event_stream_ref* stream, error_code& ec, std::string& what) {
    if (!ctx.is_open()) {
        ec = asio::error::bad_descriptor;
        what = "rdma_asio::subnet_event_client::open: the context is not open";
        return nullptr;
    }
    return open_subnet_event_client(ex, ctx.device_name(), port, opts, stream, ec, what);
}

} // namespace rdma_asio::detail
