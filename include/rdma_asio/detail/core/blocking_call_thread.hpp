// A thread per execution context for the few verbs calls that may block their
// caller for long: ibv_create_ah(3) on RoCE resolves the destination's Ethernet
// address in the kernel and waits for the neighbour's answer (about a second when
// nobody answers). An asynchronous operation must not block its initiator, so such
// a call runs here, as Asio's resolver runs getaddrinfo on a thread of its own.
//
// Threads started as calls come (a call waits behind another only when four are
// busy: a destination that never answers must not hold up the others) and joined
// when the execution context shuts down: calls in progress then finish first
// (bounded by the kernel's own timeout), calls still queued are destroyed without
// running, and a call submitted later is destroyed at once. A call owns whatever
// it touches.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <functional>

namespace rdma_asio::detail {

/// Runs `call` on a blocking-call thread of `ex`'s execution context (see the
/// top of this file). Throws std::system_error when the thread cannot be started,
/// std::bad_alloc.
void run_blocking_call(const asio::any_io_executor& ex, std::function<void()> call);

} // namespace rdma_asio::detail
