// sm_watch: prints subnet-manager events (ibv_register_sm_events) as they arrive.
// Registers for every GID and multicast-group event, or for the GIDs given, and
// prints each event with a timestamp. On a verbs device the events come through
// the device's async_event_stream, next to its port events; on a CA that has no
// verbs device (a simulated fabric) through the client itself. Ctrl-C (SIGINT) or
// SIGTERM unsubscribes and ends it.
//
//   sm_watch [--ca NAME] [--port N] [--ugid GID]... [--mgid GID]...
#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/subnet_event_client.hpp>

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

struct arguments {
    std::string ca;
    int port = 1;
    std::vector<ibv_gid> gids;
    rdma_asio::sm_event events{};
};

std::optional<arguments> parse(int argc, char** argv) {
    arguments args;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc)
            return std::nullopt;
        const char* value = argv[++i];
        if (arg == "--ca") {
            args.ca = value;
        } else if (arg == "--port") {
            args.port = std::atoi(value);
        } else if (arg == "--ugid" || arg == "--mgid") {
            std::error_code ec;
            args.gids.push_back(rdma_asio::gid_from_string(value, ec));
            if (ec)
                return std::nullopt;
            args.events = args.events |
                          (arg == "--ugid" ? rdma_asio::sm_event::ugid : rdma_asio::sm_event::mgid);
        } else {
            return std::nullopt;
        }
    }
    if (args.gids.empty())
        args.events = rdma_asio::sm_event::all;
    return args;
}

void print(const rdma_asio::async_event& ev) {
    if (ev.element() == rdma_asio::event_element::gid)
        std::printf("%.*s port %d gid %s\n", static_cast<int>(ev.name().size()), ev.name().data(),
                    ev.port_num(), rdma_asio::to_string(ev.gid()).c_str());
    else
        std::printf("%.*s port %d\n", static_cast<int>(ev.name().size()), ev.name().data(),
                    ev.port_num());
    std::fflush(stdout);
}

// snippet-begin: sm-watch-loop
template <class EventSource>
asio::awaitable<int> watch(rdma_asio::subnet_event_client& client, EventSource& events,
                           const arguments& args) {
    using asio::experimental::as_tuple;
    auto [ec] =
        co_await client.async_register(args.events, args.gids, as_tuple(asio::use_awaitable));
    std::printf("register %s: %s\n", rdma_asio::to_string(args.events).c_str(),
                ec ? ec.message().c_str() : "ok");
    std::fflush(stdout);
    if (ec)
        co_return 1;
    for (;;) {
        auto [error, ev] = co_await events.async_next(as_tuple(asio::use_awaitable));
        if (error == asio::error::operation_aborted)
            co_return 0; // Ctrl-C
        if (error) {
            std::printf("%s\n", error.message().c_str());
            co_return 1;
        }
        print(ev);
    }
}
// snippet-end: sm-watch-loop

} // namespace

int main(int argc, char** argv) {
    const auto args = parse(argc, argv);
    if (!args) {
        std::fprintf(stderr,
                     "usage: sm_watch [--ca NAME] [--port N] [--ugid GID]... [--mgid GID]...\n");
        return 2;
    }
    try {
        asio::io_context ioc;
        // A verbs device: subnet events join its async events. None (e.g. a CA of
        // a simulated fabric): the client delivers them itself.
        std::error_code no_device;
        rdma_asio::context ctx;
        ctx.open(args->ca, no_device);
        std::optional<rdma_asio::async_event_stream> stream;
        std::unique_ptr<rdma_asio::subnet_event_client> client;
        if (!no_device) {
            stream.emplace(ioc, ctx);
            client = std::make_unique<rdma_asio::subnet_event_client>(*stream, ctx, args->port);
        } else {
            client = std::make_unique<rdma_asio::subnet_event_client>(ioc, args->ca, args->port);
        }
        std::printf("sm_watch: %s port %d, MADs through %s\n",
                    args->ca.empty() ? "(first CA)" : args->ca.c_str(), args->port,
                    client->delivery() == rdma_asio::umad_delivery::reactor ? "the reactor"
                                                                            : "a reader thread");
        std::fflush(stdout);

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](std::error_code, int) {
            client->async_close([&](std::error_code ec) {
                std::printf("unsubscribed: %s\n", ec ? ec.message().c_str() : "ok");
                if (stream)
                    stream->close();
            });
        });
        int status = 0;
        auto finished = [&](std::exception_ptr e, int result) {
            status = e ? 1 : result;
            signals.cancel();
            client->close();
            if (stream)
                stream->close();
        };
        if (stream)
            asio::co_spawn(ioc, watch(*client, *stream, *args), finished);
        else
            asio::co_spawn(ioc, watch(*client, *client, *args), finished);
        ioc.run();
        return status;
    } catch (const std::system_error& e) {
        std::fprintf(stderr, "sm_watch: %s\n", e.what());
        return 1;
    }
}
