// What an asynchronous operation completed with, for tests: how many times its
// handler ran (an operation completes exactly once), the error and the values.
//
// The state is shared by the recorder and every handler made from it, so a
// handler that outlives the recorder (left in a stopped io_context, or destroyed
// by its shutdown) never writes to freed memory.
#pragma once

#include "asio_alias.hpp"

#include <cstddef>
#include <memory>
#include <system_error>
#include <tuple>
#include <utility>

namespace rdma_asio::test {

/// Records completions of signature void(rdma_asio::error_code, Values...).
template <class... Values>
class recorder {
    struct state {
        int calls = 0;
        rdma_asio::error_code ec;
        std::tuple<Values...> values;

        void record(rdma_asio::error_code e, Values... v) {
            ++calls;
            ec = e;
            values = std::tuple<Values...>(std::move(v)...);
        }
    };

public:
    /// A handler with the executor `ex` and the cancellation slot `slot`
    /// associated (the slot may be unconnected).
    template <class Executor>
    struct bound_handler {
        std::shared_ptr<state> s;
        Executor ex;
        asio::cancellation_slot slot;

        using executor_type = Executor;
        executor_type get_executor() const noexcept { return ex; }
        using cancellation_slot_type = asio::cancellation_slot;
        cancellation_slot_type get_cancellation_slot() const noexcept { return slot; }

        void operator()(rdma_asio::error_code ec, Values... v) { s->record(ec, std::move(v)...); }
    };

    /// A plain callback: nothing associated, so the operation's own executor
    /// runs it.
    auto handler() const {
        return [s = s_](rdma_asio::error_code ec, Values... v) { s->record(ec, std::move(v)...); };
    }
    template <class Executor>
    bound_handler<Executor> on(const Executor& ex, asio::cancellation_slot slot = {}) const {
        return {s_, ex, slot};
    }
    bound_handler<asio::io_context::executor_type> on(asio::io_context& ioc,
                                                      asio::cancellation_slot slot = {}) const {
        return {s_, ioc.get_executor(), slot};
    }

    /// How many times a handler ran.
    int calls() const noexcept { return s_->calls; }
    bool ran() const noexcept { return s_->calls > 0; }
    /// The error and values of the last completion (default-constructed before).
    const rdma_asio::error_code& ec() const noexcept { return s_->ec; }
    template <std::size_t I = 0>
    auto& value() const noexcept {
        return std::get<I>(s_->values);
    }

private:
    std::shared_ptr<state> s_ = std::make_shared<state>();
};

} // namespace rdma_asio::test
