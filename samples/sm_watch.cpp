// sm_watch: prints subnet-manager events (ibv_register_sm_events) as they arrive.
// Registers for every GID and multicast-group event, or for the GIDs given, and
// prints each event with a timestamp. On a verbs device the events come through
// the device's async_event_stream, next to its port events; on a CA that has no
// verbs device (a simulated fabric) through the client itself. Ctrl-C (SIGINT) or
// SIGTERM unsubscribes and ends it.
//
//   sm_watch [-C|-d CA] [-P PORT] [--ugid GID]... [--mgid GID]...
#include "common/command_line.hpp"

#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/error.hpp>
#include <rdma_asio/subnet_event_client.hpp>

#include "asio_alias.hpp"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

struct arguments {
    std::string ca;
    int port = 1;
    std::vector<ibv_gid> gids;
    rdma_asio::sm_event_mask events{};
};

// The options of infiniband-diags' tools (-C CA, -P PORT) and of rdma-core's
// verbs tools (-d DEV) for the CA; GIDs to watch, each option once per GID.
arguments parse(int argc, char** argv) {
    arguments args;
    sample::command_line cli("sm_watch",
                             "Print the subnet-manager events of an InfiniBand port as they "
                             "arrive (like ibv_register_sm_events); Ctrl-C ends it.");
    cli.option('C', "ca", "CA", "the CA (RDMA device) to use (default: the first)", args.ca);
    cli.option('d', "ib-dev", "DEV", "the same as --ca", args.ca);
    cli.number('P', "port", "PORT", "the CA's port (default: 1)", args.port, 1, 255);
    auto gid_option = [&](rdma_asio::sm_event_mask kind) {
        return [&args, kind](const char* text) {
            rdma_asio::error_code ec;
            args.gids.push_back(rdma_asio::gid_from_string(text, ec));
            if (ec)
                throw sample::bad_value("expected a GID such as fe80::2:c903:a:1");
            args.events = args.events | kind;
        };
    };
    cli.option(0, "ugid", "GID", "watch only this port GID (repeatable; default: all GIDs, groups)",
               gid_option(rdma_asio::sm_event_mask::ugid));
    cli.option(0, "mgid", "GID", "watch only this multicast group (repeatable)",
               gid_option(rdma_asio::sm_event_mask::mgid));
    cli.parse(argc, argv);
    if (args.gids.empty())
        args.events = rdma_asio::sm_event_mask::all;
    return args;
}

// One line saying what is wrong, for the errors a user makes.
void print_error(const rdma_asio::system_error& e, const std::string& ca, int port) {
    const std::string name = ca.empty() ? "the first CA" : ca;
    if (e.code() == rdma_asio::errc::device_not_found)
        std::fprintf(stderr, "sm_watch: no CA called %s\n", ca.c_str());
    else if (e.code() == rdma_asio::errc::no_device)
        std::fprintf(stderr, "sm_watch: no CA (RDMA device) found\n");
    else if (e.code() == rdma_asio::errc::invalid_port && ca.empty())
        std::fprintf(stderr, "sm_watch: no CA has a port %d\n", port);
    else if (e.code() == rdma_asio::errc::invalid_port)
        std::fprintf(stderr, "sm_watch: %s has no port %d\n", ca.c_str(), port);
    else if (e.code() == rdma_asio::errc::no_subnet_manager)
        std::fprintf(stderr,
                     "sm_watch: %s port %d: RoCE has no SM, hence no subnet events "
                     "(async_watch shows its GID changes)\n",
                     name.c_str(), port);
    else
        std::fprintf(stderr, "sm_watch: %s\n", e.what());
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
    std::string ca = args.ca; // the CA actually used, once known
    try {
        asio::io_context ioc;
        // A verbs device: subnet events join its async events. None (e.g. a CA of
        // a simulated fabric): the client delivers them itself.
        rdma_asio::error_code no_device;
        rdma_asio::context ctx;
        ctx.open(args.ca, no_device);
        std::optional<rdma_asio::async_event_stream> stream;
        // snippet-begin: subnet-open
        rdma_asio::subnet_event_client client(ioc);
        rdma_asio::subnet_event_client::options where;
        where.port = args.port;
        if (!no_device) {
            ca = ctx.device_name();
            where.ca_name = ca;
            stream.emplace(ioc, ctx);
            client.open(*stream, where);
        } else {
            where.ca_name = args.ca;
            client.open(where);
        }
        // snippet-end
        std::printf("sm_watch: %s port %d, MADs through %s\n",
                    ca.empty() ? "(first CA)" : ca.c_str(), args.port,
                    client.delivery() == rdma_asio::umad_delivery::reactor ? "the reactor"
                                                                           : "a reader thread");
        std::fflush(stdout);

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](rdma_asio::error_code, int) {
            client.async_close([&](rdma_asio::error_code ec) {
                std::printf("unsubscribed: %s\n", ec ? ec.message().c_str() : "ok");
                // Now, not at exit: a second Ctrl-C (timeout(1) passes on the one it
                // gets) may end the process before its buffers are written.
                std::fflush(stdout);
                if (stream)
                    stream->close();
            });
        });
        int status = 0;
        auto finished = [&](std::exception_ptr e, int result) {
            status = e ? 1 : result;
            signals.cancel();
            client.close();
            if (stream)
                stream->close();
        };
        if (stream)
            asio::co_spawn(ioc, watch(client, *stream, args), finished);
        else
            asio::co_spawn(ioc, watch(client, client, args), finished);
        ioc.run();
        return status;
    } catch (const rdma_asio::system_error& e) {
        print_error(e, ca, args.port);
        return 1;
    }
}
