// Starts a composed operation (asio::async_compose) from inside an initiation, with
// the handler the initiation was given, whatever its value category.
//
// Why: async_compose binds its token to a non-const reference and moves the handler
// out of it, so an initiation that passes its `handler` on as it is refuses a const
// lvalue handler, which Asio's own operations take (they copy it). A copy made here
// takes any of them: the copy is moved into the operation, as an rvalue handler was.
//
// And the question each step of such an operation asks: has its cancellation slot
// been emitted (any type) since it started?
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

template <class Signature, class Implementation, class Handler, class IoExecutor>
void start_composed(Implementation&& implementation, Handler&& handler, const IoExecutor& io_ex) {
    std::decay_t<Handler> own(std::forward<Handler>(handler));
    asio::async_compose<std::decay_t<Handler>, Signature>(
        std::forward<Implementation>(implementation), own, io_ex);
}

template <class Self>
bool composed_cancelled(Self& self) {
    return self.get_cancellation_state().cancelled() != asio::cancellation_type::none;
}

} // namespace rdma_asio::detail
