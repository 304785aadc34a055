// What a dispatcher's wait puts in its handler's cancellation slot.
//
// Its own address is the key the dispatcher looks the wait up by, so a late signal
// for an operation that already completed finds nothing. It remembers the request
// for the waiter's handler: a wait that had already taken an event when the signal
// came (its handler queued, not yet run) gives the event back as the handler runs,
// and reports operation_aborted. So no idiom that cancels the loser of a race
// (`||`, parallel groups, timeouts) can lose an event.
//
// Dispatcher: `void cancel_waiter(const wait_canceller*)`.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <atomic>
#include <memory>
#include <utility>

namespace rdma_asio::detail {

template <class Dispatcher>
class wait_canceller {
public:
    explicit wait_canceller(std::weak_ptr<Dispatcher> d) : dispatcher(std::move(d)) {}

    void operator()(asio::cancellation_type type) {
        if (type == asio::cancellation_type::none)
            return;
        requested_.store(true, std::memory_order_release);
        if (auto d = dispatcher.lock())
            d->cancel_waiter(this);
    }
    bool requested() const noexcept { return requested_.load(std::memory_order_acquire); }

    std::weak_ptr<Dispatcher> dispatcher;

private:
    std::atomic<bool> requested_{false};
};

} // namespace rdma_asio::detail
