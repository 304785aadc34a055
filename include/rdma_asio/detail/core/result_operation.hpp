// An operation whose result is known as it starts: an operation of an object that
// is not open (bad_descriptor), or one refused before it began. It is delivered
// as every other operation is (handler_operation), posted: never inside the
// initiating call.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/handler_operation.hpp"
#include "rdma_asio/detail/core/operation.hpp"

#include <tuple>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

template <class Handler, class IoExecutor, class... Values>
class result_operation final
    : public handler_operation<result_operation<Handler, IoExecutor, Values...>, operation, Handler,
                               IoExecutor> {
    using base = handler_operation<result_operation, operation, Handler, IoExecutor>;

public:
    using typename base::ptr;

    template <class H, class... Args>
    result_operation(H&& handler, const IoExecutor& io_ex, error_code ec, Args&&... values)
        : base(std::forward<H>(handler), io_ex), ec_(ec), values_(std::forward<Args>(values)...) {}

    static void invoke(ptr self) {
        Handler handler(std::move(self->handler_));
        const error_code ec = self->ec_;
        std::tuple<Values...> values(std::move(self->values_));
        self.reset();
        std::apply([&](Values&... v) { std::move(handler)(ec, std::move(v)...); }, values);
    }

private:
    error_code ec_;
    std::tuple<Values...> values_;
};

/// Completes `handler` with `ec` and `values`, posted to its associated executor
/// (by default `io_ex`, which must be able to run it).
template <class Handler, class IoExecutor, class... Values>
void post_result(Handler&& handler, const IoExecutor& io_ex, error_code ec, Values&&... values) {
    using op = result_operation<std::decay_t<Handler>, IoExecutor, std::decay_t<Values>...>;
    op::create(std::forward<Handler>(handler), io_ex, ec, std::forward<Values>(values)...)
        .release()
        ->complete(delivery::post);
}

} // namespace rdma_asio::detail
