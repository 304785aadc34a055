// The work an operation holds on its handler's executor: io_context::run() does
// not return while it is held, the handler is posted through the executor it
// named (a strand stays a strand), and it may run inline only on a thread that
// runs that io_context.
#include "rdma_asio/detail/handler_work.hpp"

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

} // namespace handler_work_test
