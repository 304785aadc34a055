#include "rdma_asio/detail/core/shutdown_registry.hpp"

#include <algorithm>

namespace rdma_asio::detail {

asio::execution_context::id shutdown_registry::id;

shutdown_registry::shutdown_registry(asio::execution_context& ctx)
    : asio::execution_context::service(ctx) {}

void shutdown_registry::add(std::weak_ptr<shutdown_participant> participant) {
    {
        std::lock_guard lock(mutex_);
        if (!shut_down_) {
            // Forget the participants that are gone, so the list stays as long as
            // the number of live ones.
            std::erase_if(participants_, [](const auto& p) { return p.expired(); });
            participants_.push_back(std::move(participant));
            return;
        }
    }
    if (auto p = participant.lock())
        p->shutdown();
}

void shutdown_registry::shutdown() {
    std::vector<std::weak_ptr<shutdown_participant>> participants;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        participants.swap(participants_);
    }
    // Outside the lock: destroying a handler may destroy objects that own other
    // participants, which are then either gone (expired) or shut down here.
    for (auto& weak : participants)
        if (auto p = weak.lock())
            p->shutdown();
}

} // namespace rdma_asio::detail
