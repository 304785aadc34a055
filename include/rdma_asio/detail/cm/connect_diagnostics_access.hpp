// How a connect writes into the program's connect_diagnostics, which offers a
// program only reading. Writing allocates: a connect that cannot note a failure
// (no memory) still reports its error code, so a failure to note is dropped.
#pragma once

#include "rdma_asio/connect_diagnostics.hpp"

#include <new>
#include <string_view>

namespace rdma_asio::detail {

struct connect_diagnostics_access {
    static void clear(connect_diagnostics* d) noexcept {
        if (d)
            d->clear();
    }
    static void looking_up(connect_diagnostics* d, std::string_view host,
                           std::string_view service) noexcept {
        if (!d)
            return;
        try {
            d->looking_up(host, service);
        } catch (const std::bad_alloc&) {
        }
    }
    static void add(connect_diagnostics* d, connect_step step,
                    const asio::ip::tcp::endpoint& endpoint, const error_code& error) noexcept {
        if (!d)
            return;
        try {
            d->add(step, endpoint, error);
        } catch (const std::bad_alloc&) {
        }
    }
};

} // namespace rdma_asio::detail
