#include "rdma_asio/detail/cq/device_failure.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace rdma_asio::detail {
namespace {

struct watched_channel {
    ibv_context* ctx;
    std::weak_ptr<channel_dispatcher> dispatcher;
};

struct registry {
    std::mutex mutex;
    std::vector<watched_channel> channels;
};

registry& the_registry() {
    static registry r;
    return r;
}

} // namespace

void watch_device_failure(ibv_context* ctx, std::weak_ptr<channel_dispatcher> dispatcher) {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    std::erase_if(r.channels, [](const watched_channel& c) { return c.dispatcher.expired(); });
    r.channels.push_back({ctx, std::move(dispatcher)});
}

void announce_device_failure(ibv_context* ctx, const error_code& ec) noexcept {
    std::vector<std::shared_ptr<channel_dispatcher>> affected;
    {
        registry& r = the_registry();
        std::lock_guard lock(r.mutex);
        try {
            for (const auto& c : r.channels)
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
