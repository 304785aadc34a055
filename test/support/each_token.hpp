// Runs one asynchronous operation with every kind of completion token, each in a
// Catch2 SECTION of its own, as Asio's archetype tests do: a plain callback, a
// coroutine (use_awaitable), use_future, deferred, as_tuple, redirect_error, the
// bind_executor / bind_cancellation_slot / bind_allocator wrappers, and a token of
// the test's own through async_result. Each kind is a separate use of the
// operation's async_initiate, so a kind the operation mishandles fails to compile
// or completes wrongly; the test checks what the completion got.
#pragma once

#include "counting_allocator.hpp"
#include "recorder.hpp"
#include "run_until.hpp"

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

namespace rdma_asio::test {

/// A completion token of a test's own: the initiation gets the wrapped handler,
/// and the initiating function returns `initiated{true}` (through async_result, as
/// any user-defined token does).
template <class Handler>
struct own_token {
    Handler handler;
};
struct initiated {
    bool value = false;
};

/// What an operation needs of a plain callback: nothing (its own executor runs
/// the handler) ...
struct as_is {
    template <class Handler>
    Handler operator()(Handler h) const {
        return h;
    }
};
/// ... or an executor (an operation of an object that has none, e.g. a
/// default-constructed cm_id).
struct on_executor {
    asio::io_context& ioc;
    template <class Handler>
    auto operator()(Handler h) const {
        return asio::bind_executor(ioc, std::move(h));
    }
};

/// Completion signature void(rdma_asio::error_code, Values...), at most one value.
template <class... Values>
struct each_token {
    static_assert(sizeof...(Values) <= 1, "one value at most, as every rdma_asio operation");

    /// `start(token)` makes the initiating call and returns its result;
    /// `make_ready()` then lets the operation complete (the imitation kernel
    /// raises an event; nothing for an operation that fails at once); `adapt`
    /// wraps a callback as the operation needs. Returns what the one completion
    /// got, recorded on the test's thread; each wait is bounded.
    /// An operation that fails without waiting for anything (a closed object, bad
    /// input): through every kind of token it completes once, with `expected` and
    /// the default value.
    template <class Start, class Adapt = as_is>
    static void fails_at_once(asio::io_context& ioc, Start start, rdma_asio::error_code expected,
                              Adapt adapt = {}) {
        auto got = complete(
            ioc, start, [] {}, adapt);
        REQUIRE(got.calls() == 1);
        CHECK(got.ec() == expected);
        if constexpr (sizeof...(Values) == 1)
            CHECK(got.value() == (Values{}, ...));
    }

    template <class Start, class MakeReady, class Adapt = as_is>
    static recorder<Values...> complete(asio::io_context& ioc, Start start, MakeReady make_ready,
                                        Adapt adapt = {}) {
        recorder<Values...> got;
        auto run_until = [&ioc](const std::function<bool()>& done) {
            rdma_asio::test::run_until(ioc, done, std::chrono::seconds(10));
        };
        auto run_until_recorded = [&] { run_until([&] { return got.ran(); }); };

        SECTION("a plain callback") {
            start(adapt(got.handler()));
            CHECK(got.calls() == 0); // never inside the initiating call
            make_ready();
            run_until_recorded();
        }
        SECTION("a plain callback passed as an lvalue") {
            auto handler = adapt(got.handler()); // the operation takes a copy
            start(handler);
            CHECK(got.calls() == 0);
            make_ready();
            run_until_recorded();
        }
        // As Asio's own operations take it. Not with an executor bound: Asio itself
        // refuses a const executor_binder (its async_result hands the target on as
        // non-const), so with `on_executor` there is nothing of ours to check.
        if constexpr (std::is_same_v<Adapt, as_is>) {
            SECTION("a plain callback passed as a const lvalue") {
                const auto handler = got.handler(); // the operation takes a copy
                start(handler);
                CHECK(got.calls() == 0);
                make_ready();
                run_until_recorded();
            }
        }
        SECTION("use_awaitable") {
            asio::co_spawn(
                ioc,
                [&]() -> asio::awaitable<void> {
                    auto record = got.handler();
                    try {
                        if constexpr (sizeof...(Values) == 0) {
                            co_await start(asio::use_awaitable);
                            record(rdma_asio::error_code{});
                        } else {
                            auto v = co_await start(asio::use_awaitable);
                            record(rdma_asio::error_code{}, std::move(v));
                        }
                    } catch (const rdma_asio::system_error& e) {
                        record(e.code(), Values{}...);
                    }
                },
                asio::detached);
            ioc.poll(); // the coroutine is in the initiating call, or waits in the operation
            make_ready();
            run_until_recorded();
        }
        SECTION("use_future") {
            auto future = start(asio::use_future);
            make_ready();
            run_until([&] {
                return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
            });
            REQUIRE(future.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
            auto record = got.handler();
            try {
                if constexpr (sizeof...(Values) == 0) {
                    future.get();
                    record(rdma_asio::error_code{});
                } else {
                    record(rdma_asio::error_code{}, future.get());
                }
            } catch (const rdma_asio::system_error& e) {
                record(e.code(), Values{}...);
            }
        }
        SECTION("deferred") {
            auto op = start(asio::experimental::deferred);
            std::move(op)(adapt(got.handler()));
            CHECK(got.calls() == 0);
            make_ready();
            run_until_recorded();
        }
        SECTION("as_tuple") {
            start(asio::experimental::as_tuple(adapt(
                [record = got.handler()](std::tuple<rdma_asio::error_code, Values...> t) mutable {
                    std::apply(record, std::move(t));
                })));
            make_ready();
            run_until_recorded();
        }
        SECTION("redirect_error") {
            rdma_asio::error_code ec = asio::error::fault; // overwritten by the completion
            start(asio::redirect_error(adapt([&ec, record = got.handler()](Values... v) mutable {
                                           record(ec, std::move(v)...);
                                       }),
                                       ec));
            make_ready();
            run_until_recorded();
        }
        SECTION("bind_executor") {
            auto strand = asio::make_strand(ioc);
            bool on_strand = false;
            start(asio::bind_executor(strand, [&on_strand, strand, record = got.handler()](
                                                  rdma_asio::error_code ec, Values... v) mutable {
                on_strand = strand.running_in_this_thread();
                record(ec, std::move(v)...);
            }));
            make_ready();
            run_until_recorded();
            CHECK(on_strand);
        }
        SECTION("bind_cancellation_slot (no signal)") {
            asio::cancellation_signal signal;
            start(asio::bind_cancellation_slot(signal.slot(), adapt(got.handler())));
            make_ready();
            run_until_recorded();
        }
        SECTION("bind_allocator") {
            allocation_count count;
            start(asio::bind_allocator(counting_allocator<void>(count), adapt(got.handler())));
            make_ready();
            run_until_recorded();
            CHECK(count.bytes_held == 0); // whatever went through it came back
        }
        SECTION("a token of its own, through async_result") {
            auto handler = adapt(got.handler());
            const initiated result = start(own_token<decltype(handler)>{std::move(handler)});
            CHECK(result.value);
            make_ready();
            run_until_recorded();
        }
        ioc.restart();
        ioc.poll();              // a second completion, if one was queued, runs now
        CHECK(got.calls() == 1); // exactly one completion
        return got;
    }
};

} // namespace rdma_asio::test

template <class Handler, class... Signatures>
class asio::async_result<rdma_asio::test::own_token<Handler>, Signatures...> {
public:
    using return_type = rdma_asio::test::initiated;

    template <class Initiation, class RawToken, class... Args>
    static return_type initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
        std::move(initiation)(std::move(token.handler), std::forward<Args>(args)...);
        return {true};
    }
};
