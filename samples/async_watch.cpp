// async_watch: the Asio counterpart of rdma-core's ibv_asyncwatch. Watches the
// asynchronous events of every RDMA device (or the one named) with one coroutine
// per device and prints each event with a timestamp, the object it concerns and,
// for port events, the port's state. Ctrl-C (SIGINT) or SIGTERM ends it cleanly.
//
//   async_watch [-d DEVICE]
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/device_list.hpp>

#include "asio_alias.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <list>
#include <string>

namespace {

struct watched_device {
    rdma_asio::context ctx;
    rdma_asio::async_event_stream events;
};

std::string timestamp() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    char text[32];
    std::strftime(text, sizeof text, "%H:%M:%S", std::localtime(&t));
    return std::string(text) + "." + std::to_string(1000 + ms.count()).substr(1);
}

std::string describe(const rdma_asio::async_event& ev, const rdma_asio::async_event_stream& s) {
    char text[96];
    switch (ev.element()) {
    case rdma_asio::event_element::cq:
        std::snprintf(text, sizeof text, "cq %p", static_cast<void*>(ev.cq()));
        return text;
    case rdma_asio::event_element::qp:
        std::snprintf(text, sizeof text, "qp 0x%06x", ev.qp()->qp_num);
        return text;
    case rdma_asio::event_element::srq:
        std::snprintf(text, sizeof text, "srq %p", static_cast<void*>(ev.srq()));
        return text;
    case rdma_asio::event_element::wq:
        std::snprintf(text, sizeof text, "wq 0x%06x", ev.wq()->wq_num);
        return text;
    case rdma_asio::event_element::port: {
        // The cached state, refreshed when the event was read.
        auto port = s.port(ev.port_num());
        std::snprintf(text, sizeof text, "port %d, now %s, %zu GIDs", ev.port_num(),
                      port ? rdma_asio::port_state_name(port->state).data() : "?",
                      port ? port->gids.size() : 0);
        return text;
    }
    case rdma_asio::event_element::gid:
        return "gid " + rdma_asio::to_string(ev.gid());
    case rdma_asio::event_element::device:
        return "device";
    }
    return {};
}

// snippet-begin: watch-loop
asio::awaitable<void> watch(watched_device& dev) {
    const std::string name = dev.ctx.device_name();
    for (;;) {
        auto [ec, ev] =
            co_await dev.events.async_next(asio::experimental::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return; // Ctrl-C
        if (ec) {
            std::printf("%s %s: %s\n", timestamp().c_str(), name.c_str(), ec.message().c_str());
            break;
        }
        std::printf("%s %s: %s (%s)\n", timestamp().c_str(), name.c_str(), ev.name().data(),
                    describe(ev, dev.events).c_str());
        std::fflush(stdout);
        // `ev` acks when it goes out of scope, before the next wait.
    }
    // The device is gone: close what is open on it so its removal can finish.
    dev.events.close();
    dev.ctx.close();
}
// snippet-end

} // namespace

int main(int argc, char* argv[]) {
    std::string only;
    sample::command_line cli("async_watch",
                             "Print the asynchronous events of RDMA devices as they arrive "
                             "(like ibv_asyncwatch); Ctrl-C ends it.");
    cli.option('d', "ib-dev", "DEV", "watch only device DEV (default: every device)", only);
    cli.parse(argc, argv);
    if (!sample::require_rdma("async_watch"))
        return 1;
    try {
        asio::io_context ioc;
        std::list<watched_device> devices; // stable addresses for the coroutines
        rdma_asio::device_list list;
        for (rdma_asio::device d : list) {
            if (!only.empty() && d.name() != only)
                continue;
            rdma_asio::context ctx(d.native_handle());
            rdma_asio::async_event_stream events(ioc, ctx);
            devices.push_back(watched_device{std::move(ctx), std::move(events)});
            std::printf("%s watching %s\n", timestamp().c_str(),
                        devices.back().ctx.device_name().c_str());
        }
        if (devices.empty()) {
            std::fprintf(stderr, "async_watch: no RDMA device%s%s\n",
                         only.empty() ? "" : " called ", only.c_str());
            return 1;
        }
        std::fflush(stdout);

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        std::size_t running = devices.size();
        for (watched_device& dev : devices)
            asio::co_spawn(ioc, watch(dev), [&](std::exception_ptr) {
                if (--running == 0)
                    signals.cancel(); // every device is gone
            });

        signals.async_wait([&](rdma_asio::error_code ec, int) {
            if (ec)
                return;
            std::printf("%s stopping\n", timestamp().c_str());
            for (watched_device& dev : devices)
                if (dev.events.is_open())
                    dev.events.cancel();
        });
        // Ends when every watcher has returned; a removal ends its device's watcher.
        ioc.run();
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "async_watch: %s\n", e.what());
        return 1;
    }
    return 0;
}
