// Lets the library's event dispatchers take part in the shutdown of the
// execution context they run on, as Asio's own services do.
//
// A wait pending in a dispatcher holds its handler, which often owns (through a
// coroutine frame) the very object that owns the dispatcher: a cycle that Asio's
// shutdown never sees, because the waiter is not an operation of Asio's scheduler.
// On io_context destruction (execution_context::shutdown) the registry asks every
// live dispatcher to destroy its pending handlers without invoking them, which
// breaks the cycle, exactly what Asio does with the operations it queues itself.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <memory>
#include <mutex>
#include <vector>

namespace rdma_asio::detail {

/// What the registry can shut down.
class shutdown_participant {
public:
    /// Destroys pending handlers without invoking them, drops queued values and
    /// refuses later waits. Must not be called under any of the participant's locks.
    virtual void shutdown() noexcept = 0;

protected:
    ~shutdown_participant() = default;
};

class shutdown_registry : public asio::execution_context::service {
public:
    using key_type = shutdown_registry;
    static asio::execution_context::id id;

    explicit shutdown_registry(asio::execution_context& ctx);

    /// Registers a participant for the context's shutdown. After that shutdown has
    /// begun, the participant is shut down at once instead.
    void add(std::weak_ptr<shutdown_participant> participant);

private:
    void shutdown() override;

    std::mutex mutex_;
    std::vector<std::weak_ptr<shutdown_participant>> participants_;
    bool shut_down_ = false;
};

} // namespace rdma_asio::detail
