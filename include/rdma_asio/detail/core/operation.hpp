// Every asynchronous operation of the library, as whoever holds it while it is
// pending sees it: an event dispatcher (a wait: of an event stream, a channel, a
// CQ's poll) or a queue pair (a work request). It ends once, in one of two ways:
// complete() hands its result to its handler; destroy() frees it and its handler
// without invoking it, when the execution context shuts down (io_context
// destruction), as Asio does with its own operations. handler_operation.hpp holds
// the handler and is the one implementation of both.
#pragma once

#include <cstdint>

namespace rdma_asio::detail {

/// Where a completing operation's handler may run.
enum class delivery : std::uint8_t {
    /// Posted to the handler's executor, never inside the call: the caller may be
    /// the initiating function, or cancel() or close() inside another handler.
    post,
    /// Inside the call when the handler's executor allows it on this thread, as
    /// asio::dispatch would run it (an io_context running here, a strand this
    /// thread runs), else posted. Only from the library's own completion handlers
    /// (a reactor wake-up, a CQ poll's end), holding no lock: an exception the
    /// handler throws comes out of the call, as from any handler.
    may_run_here,
};

class operation {
public:
    operation(const operation&) = delete;
    operation& operator=(const operation&) = delete;

    /// Hands the operation's result to its handler and frees the operation
    /// (before the handler runs, so that a handler that starts the next operation
    /// may reuse the memory). Called once, outside every lock.
    virtual void complete(delivery how) = 0;
    /// Frees the operation and its handler without invoking it.
    virtual void destroy() noexcept = 0;

protected:
    operation() = default;
    ~operation() = default;
};

} // namespace rdma_asio::detail
