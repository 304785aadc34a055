#include "rdma_asio/detail/cq/device_failure.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/context_held.hpp"

#include <algorithm>
#include <utility>

namespace rdma_asio::detail {
namespace {

// The execution context's list. Nothing to do at shutdown: the channels'
// dispatchers are shut down by their own registry, and the list only names them.
struct context_failures {
    std::shared_ptr<device_failures> list = std::make_shared<device_failures>();
    void shutdown() noexcept {}
};

} // namespace

std::shared_ptr<device_failures> device_failures_of(const asio::any_io_executor& ex) {
    return held_by<context_failures>(asio::query(ex, asio::execution::context)).list;
}

void device_failures::watch(ibv_context* ctx, std::weak_ptr<channel_dispatcher> dispatcher) {
    std::lock_guard lock(mutex_);
    std::erase_if(channels_, [](const watched_channel& c) { return c.dispatcher.expired(); });
    channels_.push_back({ctx, std::move(dispatcher)});
}

void device_failures::announce(ibv_context* ctx, const error_code& ec) noexcept {
    std::vector<std::shared_ptr<channel_dispatcher>> affected;
    {
        std::lock_guard lock(mutex_);
        try {
            for (const auto& c : channels_)
                if (c.ctx == ctx)
                    if (auto d = c.dispatcher.lock())
                        affected.push_back(std::move(d));
        } catch (...) {
            // Out of memory: the channels still end on the node's deletion or
            // their fd's failure.
        }
    }
    for (auto& d : affected)
        d->fail(ec);
}

} // namespace rdma_asio::detail
