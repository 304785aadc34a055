// kv_client: gets and puts on kv_server's store with one-sided RDMA: a get is one
// RDMA read of the key's slot; a put takes the slot's lock with an RDMA
// compare-and-swap, reads the slot (is it free, or already this key's?), writes the
// new entry with an RDMA write and gives the lock back with a second
// compare-and-swap, so that two clients putting the same key never mix their
// entries. The server's CPU takes no part.
//
//   kv_client -a|--server ADDR [-p|--port PORT] [-r|--repeat N] COMMAND...
//
// COMMAND is `put KEY VALUE` or `get KEY`; they run in order on one connection,
// each printing one line ("KEY = VALUE", "KEY: not found", "put KEY"). With
// --repeat N the commands run N times (printing only the last round) and the
// client prints how long an operation took on average, and how many of its puts
// found their slot torn while they held its lock (none, while every writer takes
// the lock: only a write without it could land then).
// Exit status: 0 when every command succeeded (a get of a missing key included),
// 1 when one failed (a key or value too long, a slot taken by another key, a
// connection that failed), 2 on a usage error.
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

using asio::use_awaitable;

struct command {
    bool put = false;
    std::string key;
    std::string value;
};

struct options {
    std::string server;
    unsigned short port = 18710;
    int repeat = 1;
    std::vector<command> commands;
};

// Connects; the server's accept carries where the store is.
asio::awaitable<kv::store_info> connect(rdma_asio::cm_id& id) {
    const rdma_asio::cm_event ev =
        co_await sample::connect_for_private_data(id, rdma_asio::default_conn_param(id));
    const rdma_conn_param& reply = ev.conn_param();
    std::optional<kv::store_info> info = kv::decode(reply.private_data, reply.private_data_len);
    if (!info)
        throw std::runtime_error("the server sent no store description (not a kv_server?)");
    co_return *info;
}

// A connection to the store and a registered slot of its own to read into and
// write from.
class store_client {
public:
    store_client(rdma_asio::connection& conn, const kv::store_info& info,
                 const rdma_asio::protection_domain& pd)
        : qp_(conn.queue_pair()), info_(info), slot_(info.slot_size),
          mr_(pd, asio::buffer(slot_), IBV_ACCESS_LOCAL_WRITE),
          // Unique among the store's clients: this connection's QP number and the
          // process, never 0 (a free lock).
          token_((std::uint64_t{static_cast<std::uint32_t>(::getpid())} << 32) | conn.qp()->qp_num |
                 1u),
          backoff_(conn.get_executor()) {}

    /// Puts that read their slot torn while holding its lock.
    std::size_t torn_under_lock() const { return torn_under_lock_; }

    // snippet-begin: kv-client-get
    /// The entry in `key`'s slot: one RDMA read, again while a writer's entry was
    /// landing (torn).
    asio::awaitable<kv::entry> read_slot(const std::string& key) {
        for (int attempt = 0; attempt < 1000; ++attempt) {
            co_await qp_.async_read(mr_.whole(), remote_slot(key), use_awaitable);
            kv::entry e = kv::read_entry(slot_);
            // Locked: a put is writing it. Torn: a put took the lock and wrote
            // while this read was landing. Either way, read again.
            if (e.what != kv::entry::state::locked && e.what != kv::entry::state::torn)
                co_return e;
            co_await pause(attempt);
        }
        throw std::runtime_error("slot of " + key + " keeps changing while it is read");
    }

    asio::awaitable<std::optional<std::string>> get(const std::string& key) {
        kv::entry e = co_await read_slot(key);
        if (e.what == kv::entry::state::holds && e.key == key)
            co_return std::move(e.value);
        co_return std::nullopt;
    }
    // snippet-end: kv-client-get

    asio::awaitable<void> put(const std::string& key, const std::string& value) {
        if (key.empty() || key.size() > kv::max_key)
            throw std::runtime_error("key of " + std::to_string(key.size()) +
                                     " bytes: keys have 1 to " + std::to_string(kv::max_key));
        if (value.size() > kv::max_value(info_.slot_size))
            throw std::runtime_error("value of " + std::to_string(value.size()) +
                                     " bytes: this store holds up to " +
                                     std::to_string(kv::max_value(info_.slot_size)));
        co_await lock(key);
        // Read and written under the lock: no other client's put lands meanwhile.
        // (The read sees the slot locked: by this client.)
        co_await qp_.async_read(mr_.whole(), remote_slot(key), use_awaitable);
        std::memset(slot_.data(), 0, kv::lock_size);
        kv::entry e = kv::read_entry(slot_);
        if (e.what == kv::entry::state::torn)
            ++torn_under_lock_; // a write landed without the lock: never, among kv_clients
        if (e.what == kv::entry::state::holds && e.key != key) {
            co_await unlock(key);
            throw std::runtime_error("the slot of " + key + " holds " + e.key);
        }
        kv::write_entry(slot_, key, value);
        co_await qp_.async_write(mr_.at(kv::lock_size, info_.slot_size - kv::lock_size),
                                 remote_slot(key, kv::lock_size), use_awaitable);
        co_await unlock(key);
    }

private:
    // The slot's bytes from `skip` on, in the server's memory.
    rdma_asio::remote_buffer remote_slot(const std::string& key, std::uint32_t skip = 0) const {
        const std::uint64_t offset = std::uint64_t{kv::slot_of(key, info_.slots)} * info_.slot_size;
        return {info_.address + offset + skip, info_.slot_size - skip, info_.rkey};
    }

    // Takes the slot's lock: compare-and-swap from 0 (free) to this client's
    // token, again after a pause while another client holds it.
    asio::awaitable<void> lock(const std::string& key) {
        for (int attempt = 0; attempt < 1000; ++attempt) {
            const std::uint64_t before = co_await qp_.async_compare_swap(
                mr_.at(0, kv::lock_size), remote_slot(key), 0, token_, use_awaitable);
            if (before == 0)
                co_return;
            co_await pause(attempt);
        }
        throw std::runtime_error("the slot of " + key + " stays locked by another client");
    }
    // Gives the lock back: compare-and-swap from this client's token to 0.
    asio::awaitable<void> unlock(const std::string& key) {
        const std::uint64_t before = co_await qp_.async_compare_swap(
            mr_.at(0, kv::lock_size), remote_slot(key), token_, 0, use_awaitable);
        if (before != token_)
            throw std::runtime_error("the lock of " + key + "'s slot was not this client's");
    }
    // A pause before trying again: none at first, then up to a millisecond.
    asio::awaitable<void> pause(int attempt) {
        if (attempt < 4)
            co_return;
        backoff_.expires_after(std::chrono::microseconds(std::min(1000, 10 * attempt)));
        co_await backoff_.async_wait(use_awaitable);
    }

    rdma_asio::queue_pair& qp_;
    kv::store_info info_;
    std::vector<std::uint8_t> slot_;
    rdma_asio::memory_region mr_;
    std::uint64_t token_;
    asio::steady_timer backoff_;
    std::size_t torn_under_lock_ = 0;
};

asio::awaitable<int> run(rdma_asio::cm_event_channel& channel, const options& opt) {
    rdma_asio::cm_id id(channel);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(opt.port);
    ::inet_pton(AF_INET, opt.server.c_str(), &server.sin_addr);
    co_await id.async_resolve_addr(nullptr, reinterpret_cast<const sockaddr*>(&server),
                                   std::chrono::seconds(2), use_awaitable);
    co_await id.async_resolve_route(std::chrono::seconds(2), use_awaitable);
    ibv_context* verbs = id.native_handle()->verbs;
    rdma_asio::protection_domain pd(verbs);
    rdma_asio::completion_channel cq_channel(channel.get_executor(), verbs);
    rdma_asio::connection_options conn_options;
    conn_options.send_depth = 2;
    conn_options.receive_depth = 1;
    rdma_asio::connection conn(std::move(id), cq_channel, pd, conn_options);
    const kv::store_info info = co_await connect(conn.id());
    int status = 0;
    {
        store_client store(conn, info, pd);
        const auto start = std::chrono::steady_clock::now();
        std::size_t operations = 0;
        for (int round = 1; round <= opt.repeat && status == 0; ++round) {
            const bool print = round == opt.repeat;
            for (const command& c : opt.commands) {
                try {
                    if (c.put) {
                        co_await store.put(c.key, c.value);
                        if (print)
                            std::printf("put %s\n", c.key.c_str());
                    } else if (auto value = co_await store.get(c.key); print && value) {
                        std::printf("%s = %s\n", c.key.c_str(), value->c_str());
                    } else if (print) {
                        std::printf("%s: not found\n", c.key.c_str());
                    }
                    ++operations;
                } catch (const std::runtime_error& e) {
                    // Not the connection's fault (those are rdma_asio::system_error):
                    // say so and go on with the next command.
                    if (dynamic_cast<const rdma_asio::system_error*>(&e) != nullptr)
                        throw;
                    std::printf("%s %s: %s\n", c.put ? "put" : "get", c.key.c_str(), e.what());
                    status = 1;
                }
            }
        }
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count();
        if (opt.repeat > 1 && operations > 0)
            std::printf("%zu operations in %.0f us: %.1f us each; %zu puts found their slot "
                        "torn under its lock\n",
                        operations, us, us / static_cast<double>(operations),
                        store.torn_under_lock());
    }
    co_await conn.async_disconnect(use_awaitable);
    co_return status;
}

} // namespace

int main(int argc, char** argv) {
    options opt;
    sample::command_line cli("kv_client",
                             "Get and put keys in kv_server's store with one-sided RDMA reads "
                             "and writes.",
                             "COMMAND... (put KEY VALUE | get KEY)");
    cli.option('a', "server", "ADDR", "the server's IPv4 address (required)", [&](const char* v) {
        in_addr a{};
        if (::inet_pton(AF_INET, v, &a) != 1)
            throw sample::bad_value("expected an IPv4 address such as 10.0.0.1");
        opt.server = v;
    });
    cli.number('p', "port", "PORT", "the server's port (default 18710)", opt.port,
               static_cast<unsigned short>(1));
    cli.number('r', "repeat", "N",
               "run the commands N times, print the last round and the "
               "time per operation (default 1)",
               opt.repeat, 1, 100000000);
    const std::vector<std::string> words = cli.parse(argc, argv, 1, 1000000);
    if (opt.server.empty())
        cli.usage_error("--server ADDR is required");
    for (std::size_t i = 0; i < words.size();) {
        if (words[i] == "get" && i + 1 < words.size()) {
            opt.commands.push_back({false, words[i + 1], {}});
            i += 2;
        } else if (words[i] == "put" && i + 2 < words.size()) {
            opt.commands.push_back({true, words[i + 1], words[i + 2]});
            i += 3;
        } else {
            cli.usage_error("expected `get KEY` or `put KEY VALUE` at `" + words[i] + "`");
        }
    }
    if (!sample::require_rdma("kv_client"))
        return 1;
    try {
        asio::io_context ioc;
        rdma_asio::cm_event_channel channel(ioc);
        std::future<int> status = asio::co_spawn(ioc, run(channel, opt), asio::use_future);
        ioc.run();
        return status.get();
    } catch (const std::exception& e) { // rdma_asio::system_error names the call
        std::fprintf(stderr, "kv_client: %s\n", e.what());
        return 1;
    }
}
