// A Source without descriptors: every value reaches its dispatcher through
// event_dispatcher::inject (results computed elsewhere, events decoded by
// another source).
#pragma once

#include <cstddef>

namespace rdma_asio::detail {

template <class Value>
struct injected_source {
    using value_type = Value;
    std::size_t fd_count() const noexcept { return 0; }
    int native_handle(std::size_t) const noexcept { return -1; }
    template <class Sink>
    void drain(std::size_t, Sink&) noexcept {}
    void close() noexcept {}
};

} // namespace rdma_asio::detail
