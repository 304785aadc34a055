// An operation that changes something of its object as it starts: the change
// happens when the operation is launched, not when it is created.
//
// Why: with asio::deferred (or any token that stores the initiation: use_awaitable,
// a parallel group), an initiating function returns before the operation starts,
// and the operation may never start. What the initiating function itself does
// happens anyway; only what the initiation does waits for the launch. So an
// operation whose start stops something of its object (connection's
// async_disconnect stops the watch for the peer's disconnect) makes that change a
// `step` run by the initiation, then launches `op`, the underlying operation made
// with asio::experimental::deferred from state the initiating function copied
// (never a pointer to the object, which may move before the launch).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <utility>

namespace rdma_asio::detail {

template <class Step, class Deferred>
struct launch_with {
    Step step;
    Deferred op;

    template <class Handler>
    void operator()(Handler&& handler) {
        std::move(step)();
        std::move(op)(std::forward<Handler>(handler));
    }
};

/// Initiates, with `token`, an operation of signature `Signature` that runs `step`
/// as it is launched, then launches `op` (a deferred operation) with the handler.
template <class Signature, class CompletionToken, class Step, class Deferred>
auto initiate_with_step(CompletionToken&& token, Step step, Deferred op) {
    return asio::async_initiate<CompletionToken, Signature>(
        launch_with<Step, Deferred>{std::move(step), std::move(op)}, token);
}

} // namespace rdma_asio::detail
