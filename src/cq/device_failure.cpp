#include "rdma_asio/detail/cq/device_failure.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <algorithm>
#include <utility>

namespace rdma_asio::detail {
namespace {

// Holds the execution context's list. Nothing to do at shutdown: the channels'
// dispatchers are shut down by their own registry, and the list only names them.
class device_failure_service : public asio::execution_context::service {
public:
    using key_type = device_failure_service;
    static inline asio::execution_context::id id;

    explicit device_failure_service(asio::execution_context& ctx)
        : asio::execution_context::service(ctx), list_(std::make_shared<device_failures>()) {}

    std::shared_ptr<device_failures> list() const { return list_; }

private:
    void shutdown() override {}

    std::shared_ptr<device_failures> list_;
};

} // namespace

std::shared_ptr<device_failures> device_failures_of(const asio::any_io_executor& ex) {
    return asio::use_service<device_failure_service>(asio::query(ex, asio::execution::context))
        .list();
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
