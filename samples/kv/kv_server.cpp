// kv_server: a key-value store that clients read and write with one-sided RDMA.
// The server registers its memory, hands each client where it is (address, rkey
// and layout, in the private data of the rdma_cm accept), and then does nothing
// per request: kv_client's gets and puts are RDMA reads and writes that the
// server's device serves alone. The server only notices connections come and go.
//
//   kv_server [-a|--address ADDR] [-p|--port PORT] [-n|--slots N] [-s|--slot-size BYTES]
//
// When a client disconnects, the server prints how many work completions its
// connection brought to the server's CPU: 1 (the receive that waited for the
// disconnect), however many requests the client made.
// SIGINT (Ctrl-C) or SIGTERM stops it (exit status 0).
#include "kv.hpp"

#include "common/cm_steps.hpp"
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/cm_event_channel.hpp>
#include <rdma_asio/cm_id.hpp>
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/connection.hpp>
#include <rdma_asio/error.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/protection_domain.hpp>

#include "asio_alias.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using asio::use_awaitable;
using asio::experimental::as_tuple;

// The store's memory, registered once per device that rdma_cm hands a request
// from, with the protection domain and completion channel of that device.
class store {
public:
    store(asio::any_io_executor ex, std::uint32_t slots, std::uint32_t slot_size)
        : ex_(std::move(ex)), slots_(slots), slot_size_(slot_size),
          memory_(std::size_t{slots} * slot_size) {}

    struct device {
        rdma_asio::protection_domain pd;
        std::unique_ptr<rdma_asio::completion_channel> channel;
        rdma_asio::memory_region mr;
    };

    device& of(ibv_context* verbs) {
        auto it = devices_.find(verbs);
        if (it != devices_.end())
            return it->second;
        rdma_asio::protection_domain pd(verbs);
        // Remote writes need local write access as well (ibv_reg_mr(3)).
        rdma_asio::memory_region mr(pd, asio::buffer(memory_),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                        IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
        device dev{std::move(pd), std::make_unique<rdma_asio::completion_channel>(ex_, verbs),
                   std::move(mr)};
        return devices_.emplace(verbs, std::move(dev)).first->second;
    }

    kv::store_info info(const device& dev) const {
        const rdma_asio::remote_buffer whole = dev.mr.remote_at(0, memory_.size());
        return {whole.address, whole.rkey, slots_, slot_size_};
    }

private:
    asio::any_io_executor ex_;
    std::uint32_t slots_;
    std::uint32_t slot_size_;
    std::vector<std::uint8_t> memory_; // zeros: every slot empty
    // Declared after the memory, so deregistered before it goes.
    std::map<ibv_context*, device> devices_;
};

struct counts {
    std::size_t open = 0;
    std::size_t served = 0;
};

// snippet-begin: kv-server-session
// Accepts a client with the store's whereabouts in the private data, then waits
// for its disconnect. The client's gets and puts never reach this coroutine.
asio::awaitable<void> session(rdma_asio::cm_id request, store& st, counts& n) {
    try {
        store::device& dev = st.of(request.native_handle()->verbs);
        rdma_asio::connection_options options;
        options.send_depth = 1;
        options.receive_depth = 1;
        rdma_asio::connection conn(std::move(request), *dev.channel, dev.pd, options);
        const kv::store_data where = kv::encode(st.info(dev));
        rdma_conn_param param = rdma_asio::default_conn_param(conn.id());
        param.private_data = where.data();
        param.private_data_len = static_cast<std::uint8_t>(where.size());
        co_await conn.id().async_accept(param, use_awaitable);
        std::printf("client connected (%zu open)\n", ++n.open);
        // A receive of nothing, which only the client's disconnect ends
        // (errc::disconnected), as a TCP server's read ends with eof.
        auto [ec, bytes] = co_await conn.queue_pair().async_receive(rdma_asio::registered_buffer{},
                                                                    as_tuple(use_awaitable));
        --n.open;
        ++n.served;
        const std::uint64_t completions =
            conn.send_cq().counters().completions + conn.recv_cq().counters().completions;
        std::printf("client disconnected (%s): %llu work completion%s reached the server\n",
                    ec.message().c_str(), static_cast<unsigned long long>(completions),
                    completions == 1 ? "" : "s");
    } catch (const std::exception& e) {
        std::printf("session: %s\n", e.what());
    }
}
// snippet-end: kv-server-session

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // a log, line by line, also into a file
    std::string address = "0.0.0.0";
    unsigned short port = 18710;
    std::uint32_t slots = 1024;
    std::uint32_t slot_size = 256;
    sample::command_line cli("kv_server",
                             "A key-value store whose clients get and put with one-sided RDMA "
                             "reads and writes; Ctrl-C stops it.");
    cli.option('a', "address", "ADDR", "listen on IPv4 address ADDR (default 0.0.0.0)",
               [&](const char* v) {
                   in_addr a{};
                   if (::inet_pton(AF_INET, v, &a) != 1)
                       throw sample::bad_value("expected an IPv4 address such as 10.0.0.1");
                   address = v;
               });
    cli.number('p', "port", "PORT", "listen on port PORT (default 18710; 0: any)", port);
    cli.number('n', "slots", "N", "slots in the store (default 1024)", slots, std::uint32_t{1},
               std::uint32_t{1} << 20);
    cli.number('s', "slot-size", "BYTES",
               "bytes per slot, lock, header and key included (default 256, at least " +
                   std::to_string(kv::min_slot_size) + "; rounded up to a multiple of 8)",
               slot_size, kv::min_slot_size, std::uint32_t{1} << 16);
    cli.parse(argc, argv);
    // Each slot's lock must be 8-byte aligned for the clients' atomics.
    slot_size = (slot_size + kv::lock_size - 1) / kv::lock_size * kv::lock_size;
    if (!sample::require_rdma("kv_server"))
        return 1;
    try {
        asio::io_context ioc;
        rdma_asio::cm_event_channel channel(ioc);
        store st(ioc.get_executor(), slots, slot_size);
        counts n;
        rdma_asio::cm_id listener(channel);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
        listener.bind(reinterpret_cast<const sockaddr*>(&addr));
        listener.listen();
        std::printf("listening on %s port %u: %u slots of %u bytes (values up to %zu bytes)\n",
                    address.c_str(), listener.local_port(), slots, slot_size,
                    kv::max_value(slot_size));

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](rdma_asio::error_code, int) {
            listener.close();
            ioc.stop();
        });
        asio::co_spawn(ioc,
                       sample::take_requests(listener,
                                             [&](rdma_asio::cm_id request) {
                                                 asio::co_spawn(ioc,
                                                                session(std::move(request), st, n),
                                                                asio::detached);
                                             }),
                       asio::detached);
        ioc.run();
        std::printf("stopped: %zu clients served, %zu still connected\n", n.served, n.open);
        // Connected clients' sessions are suspended in their waits; leave without
        // unwinding them, as a killed process would: the kernel releases their
        // verbs and rdma_cm objects, and the clients see a disconnect.
        std::fflush(stdout);
        std::_Exit(0);
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "kv_server: %s\n", e.what());
        return 1;
    }
}
