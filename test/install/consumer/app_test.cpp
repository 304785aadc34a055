// Uses the installed test helpers: a coroutine run to its end with a deadline.
#include <rdma_asio/asio.hpp>
#include <rdma_asio/testing.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif

#include <chrono>
#include <cstdio>

namespace {
asio::awaitable<int> answer() {
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    co_return 42;
}
} // namespace

int main() {
    asio::io_context ioc;
    const int value = rdma_asio::testing::run_coroutine(ioc, answer(), std::chrono::seconds(10));
    std::printf("consumer test helpers: %d\n", value);
    return value == 42 ? 0 : 1;
}
