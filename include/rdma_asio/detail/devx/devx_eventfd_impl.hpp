// The state of an open devx_eventfd (non-template, see src/devx/devx_eventfd.cpp).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/dispatcher_state.hpp"
#include "rdma_asio/detail/devx/eventfd_source.hpp"

#include <memory>
#include <system_error>

namespace rdma_asio::detail {

class devx_eventfd_impl : public dispatcher_state<eventfd_source, int, -1> {
public:
    /// Takes ownership of `fd` (closed by close(), also when this fails) and
    /// registers it with the executor's reactor. Null with `ec` set on failure.
    static std::shared_ptr<devx_eventfd_impl> open(const asio::any_io_executor& ex, int fd,
                                                   error_code& ec);

    devx_eventfd_impl(const asio::any_io_executor& ex, int fd);

    /// Unregisters and closes the eventfd. Idempotent.
    void close() noexcept { dispatcher_->close(); }
};

/// eventfd(2), non-blocking and close-on-exec, registered with the reactor.
std::shared_ptr<devx_eventfd_impl> open_devx_eventfd(const asio::any_io_executor& ex,
                                                     error_code& ec);

} // namespace rdma_asio::detail
