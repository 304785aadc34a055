// The work an operation holds on its handler's executor (and on the I/O
// object's, when that is another): io_context::run() does not return while it is
// held, the handler is posted or dispatched through the executor it named (a
// strand stays a strand), and it may run inline only where that executor allows.
#include "rdma_asio/detail/core/handler_work.hpp"

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

namespace handler_work_test {

using rdma_asio::detail::handler_work;

namespace {

// Runs the io_context's ready handlers; true when it then ran out of work.
bool ran_out_of_work(asio::io_context& ioc) {
    ioc.restart();
    ioc.poll();
    return ioc.stopped();
}

} // namespace

TEMPLATE_TEST_CASE("held work keeps io_context::run from returning", "[handler_work]",
                   asio::any_io_executor, asio::io_context::executor_type) {
    asio::io_context ioc;
    {
        handler_work<TestType> work(TestType(ioc.get_executor()));
        CHECK_FALSE(ran_out_of_work(ioc));
    }
    CHECK(ran_out_of_work(ioc));
}

TEMPLATE_TEST_CASE("a posted handler runs on the io_context, and inline only inside it",
                   "[handler_work]", asio::any_io_executor, asio::io_context::executor_type) {
    asio::io_context ioc;
    handler_work<TestType> work(TestType(ioc.get_executor()));
    CHECK_FALSE(work.running_here()); // not inside run()
    bool ran = false, inside = false;
    work.post([&] {
        ran = true;
        inside = work.running_here();
    });
    CHECK_FALSE(ran); // posted, never run inside post()
    ioc.run_one();
    CHECK(ran);
    CHECK(inside);
}

TEST_CASE("a strand behind any_io_executor is posted to, never run inline", "[handler_work]") {
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    handler_work<asio::any_io_executor> work{asio::any_io_executor(strand)};
    CHECK_FALSE(ran_out_of_work(ioc)); // the strand's work is counted too
    bool on_strand = false, inline_allowed = true;
    work.post([&] {
        on_strand = strand.running_in_this_thread();
        inline_allowed = work.running_here();
    });
    ioc.restart();
    ioc.poll();
    CHECK(on_strand);
    CHECK_FALSE(inline_allowed);
}

TEST_CASE("a strand behind any_io_executor is dispatched to: inline only on the strand",
          "[handler_work]") {
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    handler_work<asio::any_io_executor> work{asio::any_io_executor(strand)};
    bool outside_ran_inline = true, inside_ran_inline = false, inside_ran = false;
    bool dispatched_inside = false;
    // From outside the strand: queued.
    bool ran = false;
    work.dispatch([&] { ran = true; });
    outside_ran_inline = ran;
    // From a handler running on the strand: run at once.
    asio::post(strand, [&] {
        work.dispatch([&] { dispatched_inside = true; });
        inside_ran_inline = dispatched_inside;
        inside_ran = true;
    });
    ioc.restart();
    ioc.poll();
    CHECK_FALSE(outside_ran_inline);
    CHECK(ran);
    CHECK(inside_ran);
    CHECK(inside_ran_inline);
}

TEST_CASE("work is counted on the I/O executor too when the handler's is another one",
          "[handler_work]") {
    asio::io_context io, other;
    using executor = asio::io_context::executor_type;
    {
        handler_work<executor> same(io.get_executor(), io.get_executor());
        CHECK_FALSE(same.counts_io_executor());
        handler_work<asio::any_io_executor, executor> erased(
            asio::any_io_executor(io.get_executor()), io.get_executor());
        CHECK_FALSE(erased.counts_io_executor()); // the same io_context executor, type-erased
    }
    {
        handler_work<executor> work(other.get_executor(), io.get_executor());
        CHECK(work.counts_io_executor());
        CHECK_FALSE(ran_out_of_work(io)); // the I/O object's context keeps running
        CHECK_FALSE(ran_out_of_work(other));
    }
    CHECK(ran_out_of_work(io));
    CHECK(ran_out_of_work(other));
}

} // namespace handler_work_test
