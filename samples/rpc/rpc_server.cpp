// rpc_server: a request/response service for many rdma_cm connections whose
// receive memory does not grow with them. Every connection is made on a shared
// receive queue and a pair of CQs of the thread that serves it, one of each per
// thread and device; the server posts --depth receives on each shared receive
// queue, whichever connection the next request comes on, and answers each request
// on the connection it came on (receive_info::qp_num names it).
//
//   rpc_server [-a|--address ADDR] [-p|--port PORT] [-d|--depth N] [-t|--threads N]
//
// --threads N runs N io_contexts, each on its own thread (the first on the main
// thread, which also takes the connection requests), and hands the connections to
// them in turn; a thread's connections, CQs, shared receive queue and buffers are
// used on that thread only. A client learns the depth from the accept's private
// data and keeps at most that many requests in flight. A connection ends with the
// client's goodbye: the server answers it, then closes the connection. The server
// prints a line whenever its last connection has ended ("idle: ..."), with its
// counts and the bytes it registered, and then one line per thread when there are
// several. SIGINT (Ctrl-C) or SIGTERM stops it (exit status 0).
#include "rpc.hpp"

#include "common/cm_steps.hpp"
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/cm_event_channel.hpp>

#include "asio_alias.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using asio::use_awaitable;
using asio::experimental::as_tuple;

// An accepted connection, found by its QP number when a request arrives.
struct session {
    rdma_asio::connection conn;
    std::uint64_t serial = 0; // tells it from a later session on a reused QP number
    std::uint64_t calls = 0;  // calls answered
    std::uint32_t sending = 0;
    bool said_goodbye = false;
};

struct options {
    std::string address = "0.0.0.0";
    unsigned short port = 18730;
    std::uint32_t depth = 256;
    unsigned threads = 1;
};

// What one thread's connections came to. Atomic: whichever thread ends the
// process's last connection reports every thread's counts.
struct counts {
    std::atomic<std::size_t> accepted{0};
    std::atomic<std::size_t> served{0}; // ended with a goodbye
    std::atomic<std::size_t> failed{0};
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> bad_requests{0};
};

// The connections open on all threads together; the thread that ends the last
// one calls `on_idle`.
class open_sessions {
public:
    explicit open_sessions(std::function<void()> on_idle) : on_idle_(std::move(on_idle)) {}
    void opened() noexcept { ++open_; }
    void closed() {
        if (--open_ == 0)
            on_idle_();
    }

private:
    std::atomic<std::size_t> open_{0};
    std::function<void()> on_idle_;
};

// The service on one device: its sessions, and the buffers of its pool. Of the
// pool's 2 x depth buffers, `depth` are posted on the shared receive queue at any
// time; a request's buffer then carries its response, and comes back when the
// response has been sent.
class service {
public:
    service(rpc::device_pool& pool, counts& n, open_sessions& open)
        : pool_(pool), n_(n), open_(open), buffer_back_(pool.srq().get_executor()) {
        for (std::uint32_t i = pool.depth(); i < pool.buffers(); ++i)
            free_.push_back(i);
    }

    // snippet-begin: rpc-server-receive
    // Receives requests into one buffer after another, for as long as the shared
    // receive queue is open: `depth` of these run at once.
    asio::awaitable<void> receive_requests(std::uint32_t buffer) {
        rdma_asio::receive_info info;
        for (;;) {
            auto [ec, n] = co_await pool_.srq().async_receive(pool_.buffer(buffer), info,
                                                              as_tuple(use_awaitable));
            if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
                ec == rdma_asio::errc::device_removed)
                co_return;
            if (ec) { // the connection it was for failed: post the same buffer again
                std::printf("receive: %s\n", ec.message().c_str());
                continue;
            }
            const std::uint32_t request_buffer = buffer;
            const std::uint32_t qp_num = info.qp_num;
            const std::size_t length = n; // a structured binding is not captured (clang 14)
            // The response goes out once this loop has put another buffer on the
            // shared receive queue (the co_await below, within this same handler:
            // a posted function runs after it). The client's next request, which
            // the response lets it send, then finds a receive, as a client that
            // keeps at most `depth` requests in flight is promised. (A request
            // that finds none is answered RNR, and rdma_cm's default RNR timer
            // makes its sender wait 655 ms.)
            asio::post(pool_.srq().get_executor(), [this, request_buffer, qp_num, length] {
                respond(request_buffer, qp_num, length);
            });
            buffer = co_await next_free_buffer();
        }
    }
    // snippet-end: rpc-server-receive

    // Called with the session before its accept: a request may arrive before
    // the server's ESTABLISHED does.
    session& add(rdma_asio::connection conn) {
        const std::uint32_t qp_num = conn.qp()->qp_num;
        auto s = std::make_unique<session>(session{std::move(conn), ++serials_});
        open_.opened();
        session& added = *sessions_.insert_or_assign(qp_num, std::move(s)).first->second;
        watch(qp_num, added);
        return added;
    }
    void remove(std::uint32_t qp_num) {
        if (sessions_.erase(qp_num) != 0)
            open_.closed();
    }

private:
    // snippet-begin: rpc-server-watch
    // A client that goes without its goodbye (its process ended, its connection
    // broke) sends nothing more, and on a shared receive queue its connection has
    // no receive of its own that would end: its queue pair's async_wait_error
    // is what ends the session.
    void watch(std::uint32_t qp_num, session& s) {
        s.conn.queue_pair().async_wait_error([this, qp_num,
                                              serial = s.serial](rdma_asio::error_code ec) {
            if (ec == asio::error::operation_aborted)
                return; // closed here: the session has ended already
            const auto it = sessions_.find(qp_num);
            // After its goodbye, the response's completion ends the session.
            if (it == sessions_.end() || it->second->serial != serial || it->second->said_goodbye)
                return;
            std::printf("connection on QP %u ended without its goodbye: %s\n", qp_num,
                        ec.message().c_str());
            ++n_.failed;
            sessions_.erase(it);
            open_.closed();
        });
    }
    // snippet-end: rpc-server-watch

    asio::awaitable<std::uint32_t> next_free_buffer() {
        // Every buffer is in a response still being sent: wait for one back.
        while (free_.empty())
            co_await buffer_back_.wait();
        const std::uint32_t buffer = free_.back();
        free_.pop_back();
        co_return buffer;
    }

    void give_back(std::uint32_t buffer) {
        free_.push_back(buffer);
        buffer_back_.wake_one();
    }

    // Answers the request in `buffer`, in place, on the connection it came on.
    void respond(std::uint32_t buffer, std::uint32_t qp_num, std::size_t length) {
        const auto it = sessions_.find(qp_num);
        const auto request = rpc::decode_request(pool_.bytes(buffer).first(length));
        if (it == sessions_.end() || !request) {
            ++n_.bad_requests;
            std::printf("request of %zu bytes on QP %u: %s\n", length, qp_num,
                        it == sessions_.end() ? "no such connection" : "not an rpc request");
            return give_back(buffer);
        }
        session& s = *it->second;
        rpc::response r{request->what, request->client, request->sequence, s.calls};
        if (request->what == rpc::kind::call) {
            r.result = rpc::answer(request->argument);
            ++s.calls;
            ++n_.calls;
        } else {
            s.said_goodbye = true;
        }
        const rpc::message m = rpc::encode(r);
        std::copy(m.begin(), m.end(), pool_.bytes(buffer).begin());
        ++s.sending;
        s.conn.queue_pair().async_send(
            pool_.buffer(buffer), [this, buffer, qp_num](rdma_asio::error_code ec, std::size_t) {
                give_back(buffer);
                sent(qp_num, ec);
            });
    }

    void sent(std::uint32_t qp_num, rdma_asio::error_code ec) {
        const auto it = sessions_.find(qp_num);
        if (it == sessions_.end())
            return;
        session& s = *it->second;
        --s.sending;
        if (ec) {
            std::printf("send on QP %u: %s\n", qp_num, ec.message().c_str());
            ++n_.failed;
        } else if (!s.said_goodbye || s.sending != 0) {
            return;
        } else {
            ++n_.served;
        }
        // After the goodbye's response the client sends nothing more, and closes
        // its end as this one does: neither waits for rdma_disconnect's
        // DISCONNECTED, which the other end's close may have brought already.
        sessions_.erase(it);
        open_.closed();
    }

    rpc::device_pool& pool_;
    counts& n_;
    open_sessions& open_;
    std::map<std::uint32_t, std::unique_ptr<session>> sessions_;
    std::uint64_t serials_ = 0;
    std::vector<std::uint32_t> free_;
    rpc::wait_queue buffer_back_; // receive loops waiting for a buffer
};

// One thread's services: a service per device, made with the device's pool on
// the thread's executor. The maps are locked because the thread that reports
// reads every thread's pools; everything else happens on the owning thread.
class services {
public:
    services(asio::any_io_executor ex, std::uint32_t depth, counts& n, open_sessions& open,
             std::string thread_name)
        : pools_(std::move(ex), depth, 2 * depth), n_(n), open_(open),
          thread_name_(std::move(thread_name)) {
        pools_.on_new_pool([this](rpc::device_pool& pool) {
            auto& svc =
                *services_.emplace(&pool, std::make_unique<service>(pool, n_, open_)).first->second;
            for (std::uint32_t i = 0; i < pool.depth(); ++i)
                asio::co_spawn(pool.srq().get_executor(), svc.receive_requests(i), asio::detached);
            std::printf("device %s%s: %u receives posted, %zu bytes registered\n",
                        pool.pd().native_handle()->context->device->name, thread_name_.c_str(),
                        pool.depth(), pool.registered_bytes());
        });
    }
    std::pair<rpc::device_pool&, service&> of(ibv_context* verbs) {
        std::lock_guard lock(mutex_);
        rpc::device_pool& pool = pools_.of(verbs);
        return {pool, *services_.at(&pool)};
    }
    // The bytes registered and the receives posted, over this thread's pools.
    std::pair<std::size_t, std::uint64_t> memory() const {
        std::lock_guard lock(mutex_);
        std::uint64_t posted = 0;
        for (const auto& [pool, svc] : services_)
            posted += pool->srq().posted();
        return {pools_.registered_bytes(), posted};
    }

private:
    mutable std::mutex mutex_;
    rpc::device_pools pools_;
    counts& n_;
    open_sessions& open_;
    std::string thread_name_; // " (thread K)" when there are several, else empty
    std::map<rpc::device_pool*, std::unique_ptr<service>> services_;
};

// A thread of the server: the io_context it runs, its counts, and its services.
class worker {
public:
    worker(asio::io_context& ioc, std::uint32_t depth, open_sessions& open, std::string thread_name)
        : ioc_(ioc), all_(ioc.get_executor(), depth, n_, open, std::move(thread_name)) {}
    asio::io_context& context() noexcept { return ioc_; }
    services& all() noexcept { return all_; }
    counts& n() noexcept { return n_; }

private:
    asio::io_context& ioc_;
    counts n_;
    services all_;
};

// The line printed when the process's last connection has ended: the counts and
// memory of every thread together, then each thread's own when there are several.
void report_idle(const std::vector<std::unique_ptr<worker>>& workers) {
    std::size_t served = 0, failed = 0, registered = 0;
    std::uint64_t calls = 0, bad = 0, posted = 0;
    std::string each;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        const counts& n = workers[i]->n();
        const auto [bytes, receives] = workers[i]->all().memory();
        served += n.served;
        failed += n.failed;
        calls += n.calls;
        bad += n.bad_requests;
        registered += bytes;
        posted += receives;
        char line[160];
        std::snprintf(line, sizeof line,
                      "  thread %zu: %zu connections served, %llu calls answered\n", i,
                      n.served.load(), static_cast<unsigned long long>(n.calls));
        each += line;
    }
    // One write, so that no other thread's line lands in the middle.
    std::printf("idle: %zu connections served, %llu calls answered, %zu failed, %llu bad "
                "requests; %zu bytes registered, %llu receives posted\n%s",
                served, static_cast<unsigned long long>(calls), failed,
                static_cast<unsigned long long>(bad), registered,
                static_cast<unsigned long long>(posted), workers.size() > 1 ? each.c_str() : "");
}

// snippet-begin: rpc-server-accept
// Makes the connection on the device's shared parts and accepts it, with the
// depth in the accept's private data.
asio::awaitable<void> accept_one(rdma_asio::cm_id request, services& all, counts& n) {
    std::uint32_t qp_num = 0;
    service* svc = nullptr;
    try {
        auto [pool, s] = all.of(request.native_handle()->verbs);
        svc = &s;
        // One response in flight, and room to spare.
        rdma_asio::connection conn = pool.make_connection(std::move(request), 4);
        qp_num = conn.qp()->qp_num;
        session& added = svc->add(std::move(conn));
        const rpc::accept_data depth = rpc::encode_depth(pool.depth());
        rdma_conn_param param = rdma_asio::default_conn_param(added.conn.id());
        param.private_data = depth.data();
        param.private_data_len = static_cast<std::uint8_t>(depth.size());
        co_await added.conn.id().async_accept(param, use_awaitable);
        ++n.accepted;
    } catch (const std::exception& e) {
        std::printf("accept: %s\n", e.what());
        ++n.failed;
        if (svc != nullptr && qp_num != 0)
            svc->remove(qp_num);
    }
}
// snippet-end: rpc-server-accept

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // a log, line by line, also into a file
    options opt;
    sample::command_line cli("rpc_server",
                             "Answer requests on many rdma_cm connections from shared receive "
                             "queues, one per thread; Ctrl-C stops it.");
    cli.option('a', "address", "ADDR", "listen on IPv4 address ADDR (default 0.0.0.0)",
               [&](const char* v) {
                   rpc::require_ipv4(v);
                   opt.address = v;
               });
    cli.number('p', "port", "PORT", "listen on port PORT (default 18730; 0: any)", opt.port);
    cli.number('d', "depth", "N",
               "receives posted on each thread's shared receive queue: the requests in flight "
               "it allows over all connections (default 256)",
               opt.depth, std::uint32_t{1}, std::uint32_t{1} << 16);
    cli.number('t', "threads", "N",
               "threads, each with its own io_context, CQs, shared receive queue and "
               "buffers; connections go to them in turn (default 1)",
               opt.threads, 1u, 64u);
    cli.parse(argc, argv);
    if (!sample::require_rdma("rpc_server"))
        return 1;
    try {
        asio::io_context ioc;
        rdma_asio::cm_event_channel channel(ioc);
        // Threads after the first run io_contexts of their own, kept running until
        // the server stops.
        std::vector<std::unique_ptr<asio::io_context>> others;
        std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
        std::vector<std::unique_ptr<worker>> workers;
        open_sessions open([&workers] { report_idle(workers); });
        for (unsigned i = 0; i < opt.threads; ++i) {
            asio::io_context* ctx = &ioc;
            if (i > 0) {
                ctx = others.emplace_back(std::make_unique<asio::io_context>()).get();
                keep_running.push_back(asio::make_work_guard(*ctx));
            }
            workers.push_back(std::make_unique<worker>(
                *ctx, opt.depth, open,
                opt.threads > 1 ? " (thread " + std::to_string(i) + ")" : std::string()));
        }
        rdma_asio::cm_id listener(channel);
        const sockaddr_in addr = rpc::socket_address(opt.address, opt.port);
        listener.bind(reinterpret_cast<const sockaddr*>(&addr));
        listener.listen(1024); // room for a burst of connection requests
        std::printf("listening on %s port %u\n", opt.address.c_str(), listener.local_port());

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](rdma_asio::error_code ec, int signal) {
            if (!ec)
                std::printf("signal %d: stopping\n", signal);
            listener.close();
            for (auto& ctx : others)
                ctx->stop();
            ioc.stop();
        });
        // Each request goes to the next thread in turn; its connection is made
        // there, on that thread's CQs and shared receive queue.
        std::size_t next = 0;
        auto accept = [&](rdma_asio::cm_id request) {
            worker& w = *workers[next++ % workers.size()];
            asio::co_spawn(w.context(), accept_one(std::move(request), w.all(), w.n()),
                           asio::detached);
        };
        asio::co_spawn(ioc, sample::take_requests(listener, accept), asio::detached);
        std::vector<std::thread> threads;
        for (auto& ctx : others)
            threads.emplace_back([&ctx = *ctx] { ctx.run(); });
        ioc.run();
        for (auto& t : threads)
            t.join();
        std::size_t accepted = 0, served = 0;
        std::uint64_t calls = 0;
        for (const auto& w : workers) {
            accepted += w->n().accepted;
            served += w->n().served;
            calls += w->n().calls;
        }
        std::printf("stopped: %zu connections accepted, %zu served, %llu calls answered\n",
                    accepted, served, static_cast<unsigned long long>(calls));
        // Open sessions and the receives are suspended in their waits; leave without
        // unwinding them, as a killed process would: the kernel releases their verbs
        // and rdma_cm objects, and the clients see a disconnect.
        std::fflush(stdout);
        std::_Exit(0);
    } catch (const std::exception& e) { // rdma_asio::system_error names the call
        std::fprintf(stderr, "rpc_server: %s\n", e.what());
        return 1;
    }
}
