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
open_subnet_event_client(const asio::any_io_executor& ex, const subnet_event_client_options& opts,
                         const async_event_stream_ref* stream, error_code& ec, std::string& what) {
    ec.clear();
    auto impl = std::make_shared<subnet_client_impl>(ex, config_of(opts));
    impl->open(opts.ca_name, opts.port, ec, what);
    if (ec)
        return nullptr; // its destructor closes what was opened
    if (stream)
        impl->attach(*stream);
    return impl;
}

} // namespace rdma_asio::detail
