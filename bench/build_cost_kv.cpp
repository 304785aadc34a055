// The program bench/measure-build-cost.sh compiles twice: a line-based key-value
// service, as an Asio programmer writes it, over TCP and (with -DKV_OVER_RDMA=1)
// over rdma_asio::stream. The two differ in the lines under KV_OVER_RDMA only, so the
// difference in compile time and program size is what the stream costs a program.
// Not run by the benchmarks: it is built, not measured running.
#if KV_OVER_RDMA
#include <rdma_asio/stream.hpp>
#endif
#include <asio.hpp>

#include <cstdio>
#include <map>
#include <string>

#if KV_OVER_RDMA
using socket_type = rdma_asio::stream;
using acceptor_type = rdma_asio::acceptor;
#else
using socket_type = asio::ip::tcp::socket;
using acceptor_type = asio::ip::tcp::acceptor;
#endif

// "set KEY VALUE" stores, "get KEY" answers the value (or nothing), one line each.
asio::awaitable<void> serve(socket_type s, std::map<std::string, std::string>& store) {
    std::string in;
    for (;;) {
        const std::size_t n =
            co_await asio::async_read_until(s, asio::dynamic_buffer(in), '\n', asio::use_awaitable);
        const std::string line = in.substr(0, n - 1);
        in.erase(0, n);
        std::string out = "\n";
        if (line.rfind("set ", 0) == 0) {
            const auto space = line.find(' ', 4);
            store[line.substr(4, space - 4)] =
                space == std::string::npos ? "" : line.substr(space + 1);
        } else if (line.rfind("get ", 0) == 0) {
            out = store[line.substr(4)] + "\n";
        }
        co_await asio::async_write(s, asio::buffer(out), asio::use_awaitable);
    }
}

asio::awaitable<void> listen(acceptor_type& acceptor, std::map<std::string, std::string>& store) {
    for (;;) {
#if KV_OVER_RDMA
        socket_type s = co_await rdma_asio::async_accept(acceptor, rdma_asio::stream_options(),
                                                         asio::use_awaitable);
#else
        socket_type s = co_await acceptor.async_accept(asio::use_awaitable);
#endif
        asio::co_spawn(acceptor.get_executor(), serve(std::move(s), store), asio::detached);
    }
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s ADDRESS PORT\n", argv[0]);
        return 2;
    }
    asio::io_context ioc;
    std::map<std::string, std::string> store;
    acceptor_type acceptor(
        ioc, asio::ip::tcp::endpoint(asio::ip::make_address(argv[1]),
                                     static_cast<unsigned short>(std::stoul(argv[2]))));
    asio::co_spawn(ioc, listen(acceptor, store), asio::detached);
    ioc.run();
}
