#include "rdma_asio/detail/cq/cq_pool.hpp"
#include "rdma_asio/detail/core/context_held.hpp"
#include "rdma_asio/detail/core/io_context_executor.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <utility>

namespace rdma_asio::detail {

cq_pool& cq_pool_of(const asio::any_io_executor& ex) {
    return held_by<cq_pool>(asio::query(ex, asio::execution::context));
}

std::shared_ptr<completion_queue> cq_pool::share(ibv_context* verbs,
                                                 const asio::any_io_executor& ex,
                                                 std::uint32_t need, const cq_options& options) {
    std::lock_guard lock(mutex_);
    auto it = devices_.find(verbs);
    if (it == devices_.end()) {
        ibv_device_attr attr{};
        if (const int rc = ibv_query_device(verbs, &attr); rc != 0)
            throw_error(errno_code(rc), "ibv_query_device");
        // The channel (and its CQs) not on a strand of the first stream's: it
        // serves every stream of the context on the device, and its reads need
        // no strand.
        device_cqs made{completion_channel(unstranded(ex), verbs),
                        static_cast<std::uint32_t>(attr.max_cqe),
                        {}};
        it = devices_.emplace(verbs, std::move(made)).first;
    }
    device_cqs& device = it->second;
    const cq_sharing sharing = cq_sharing::for_need(need, device.max_cqe);
    if (sharing.connections == 0)
        return nullptr;
    // A CQ whose connections all went is gone with the last of them.
    std::erase_if(device.cqs, [](const shared_cq& s) { return s.cq.expired(); });
    for (shared_cq& s : device.cqs)
        if (s.need == need && s.cq.use_count() < static_cast<long>(s.connections))
            if (std::shared_ptr<completion_queue> cq = s.cq.lock())
                return cq;
    auto cq = std::make_shared<completion_queue>(device.channel, static_cast<int>(sharing.depth),
                                                 options);
    device.cqs.push_back({cq, need, sharing.connections});
    return cq;
}

void cq_pool::shutdown() noexcept {
    std::map<ibv_context*, device_cqs> gone;
    {
        std::lock_guard lock(mutex_);
        gone.swap(devices_);
    }
}

} // namespace rdma_asio::detail
