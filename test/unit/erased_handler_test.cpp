// The handler erased to one type that an accept or a connect into a stream hands
// to the layers under it: invoked once with what it is given, its memory (from the
// handler's own allocator) given back before the handler runs and when it is
// destroyed without running; a handler that names no allocator held in a block of
// the library's per-thread cache, as every operation's is; and the handler's
// executor and cancellation slot seen through it.
#include "rdma_asio/detail/core/erased_handler.hpp"
#include "rdma_asio/detail/core/op_block_cache.hpp"

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

namespace erased_handler_test {

using rdma_asio::detail::erased_handler;

namespace {

// What the allocator below has handed out and not been given back.
struct allocations {
    int live = 0;
    int made = 0;
};

template <class T>
struct counting_allocator {
    using value_type = T;
    allocations* counts;
    explicit counting_allocator(allocations* c) noexcept : counts(c) {}
    template <class U>
    counting_allocator(const counting_allocator<U>& other) noexcept : counts(other.counts) {}
    T* allocate(std::size_t n) {
        ++counts->live;
        ++counts->made;
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        --counts->live;
        std::allocator<T>().deallocate(p, n);
    }
    template <class U>
    bool operator==(const counting_allocator<U>& other) const noexcept {
        return counts == other.counts;
    }
};

// A handler with an allocator of its own, that notes what it was called with, the
// allocations live as it ran, and its destruction.
struct noting_handler {
    using allocator_type = counting_allocator<void>;
    allocations* counts;
    std::error_code* got;
    std::string* value;
    int* live_when_run;
    int* destroyed;
    std::unique_ptr<int> owned = std::make_unique<int>(0); // move-only, as Asio's handlers may be

    allocator_type get_allocator() const noexcept { return allocator_type(counts); }
    void operator()(std::error_code ec, std::string v) {
        *got = ec;
        *value = std::move(v);
        *live_when_run = counts->live;
    }
    noting_handler(allocations* c, std::error_code* g, std::string* v, int* l, int* d)
        : counts(c), got(g), value(v), live_when_run(l), destroyed(d) {}
    noting_handler(noting_handler&&) = default;
    ~noting_handler() {
        if (owned) // not a moved-from one
            ++*destroyed;
    }
};

// What the handlers of a test note, and a handler that notes into it.
struct notes {
    allocations counts;
    std::error_code got;
    std::string value;
    int live_when_run = -1;
    int destroyed = 0;
    noting_handler handler() { return {&counts, &got, &value, &live_when_run, &destroyed}; }
};

using handler_type = erased_handler<std::error_code, std::string>;

} // namespace

TEST_CASE("an erased handler is invoked once with its arguments, its memory given back first",
          "[erased_handler]") {
    asio::io_context ioc;
    notes n;
    {
        handler_type h(n.handler(), ioc.get_executor());
        CHECK(n.counts.made == 1);
        CHECK(n.counts.live == 1);
        handler_type moved(std::move(h));
        moved(std::make_error_code(std::errc::timed_out), "made");
        CHECK(n.counts.made == 1); // the move took the memory, no second allocation
    }
    CHECK(n.got == std::errc::timed_out);
    CHECK(n.value == "made");
    CHECK(n.live_when_run == 0);
    CHECK(n.counts.live == 0);
    CHECK(n.destroyed == 1);
}

TEST_CASE("an erased handler destroyed without being invoked destroys its handler and gives "
          "its memory back",
          "[erased_handler]") {
    asio::io_context ioc;
    notes n;
    {
        handler_type h(n.handler(), ioc.get_executor());
        handler_type other(n.handler(), ioc.get_executor());
        CHECK(n.counts.live == 2);
        other = std::move(h); // the one `other` held goes
        CHECK(n.counts.live == 1);
        CHECK(n.destroyed == 1);
    }
    CHECK(n.counts.live == 0);
    CHECK(n.destroyed == 2);
    CHECK(n.live_when_run == -1); // never invoked
}

TEST_CASE("an erased handler whose handler names no allocator is held in a block of the "
          "per-thread cache",
          "[erased_handler]") {
    using rdma_asio::detail::op_block_cache;
    asio::io_context ioc;
    int calls = 0;
    auto handler = [&](std::error_code) { ++calls; };
    // One made and given back leaves at least one block cached on this thread.
    erased_handler<std::error_code>(handler, ioc.get_executor())(std::error_code());
    const std::size_t cached = op_block_cache::cached();
    REQUIRE(cached >= 1);
    {
        erased_handler<std::error_code> h(handler, ioc.get_executor());
        CHECK(op_block_cache::cached() == cached - 1); // taken from the cache
        h(std::error_code());
        CHECK(op_block_cache::cached() == cached); // back before the handler ran
    }
    CHECK(calls == 2);
}

TEST_CASE("an erased handler shows the handler's executor, else the fallback, and its "
          "cancellation slot",
          "[erased_handler]") {
    asio::io_context ioc;
    asio::io_context other;
    auto strand = asio::make_strand(other);
    bool ran = false;
    asio::cancellation_signal signal;

    erased_handler<std::error_code> bound(
        asio::bind_cancellation_slot(
            signal.slot(), asio::bind_executor(strand, [&](std::error_code) { ran = true; })),
        ioc.get_executor());
    CHECK(bound.get_executor() == asio::any_io_executor(strand));
    CHECK(bound.get_cancellation_slot() == signal.slot());

    erased_handler<std::error_code> plain([&](std::error_code) { ran = true; }, ioc.get_executor());
    CHECK(plain.get_executor() == asio::any_io_executor(ioc.get_executor()));
    CHECK_FALSE(plain.get_cancellation_slot().is_connected());

    bound(std::error_code());
    CHECK(ran);
}

} // namespace erased_handler_test
