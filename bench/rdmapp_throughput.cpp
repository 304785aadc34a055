// qp_throughput -o's traffic through rdmapp (github.com/howardlau1999/rdmapp), the
// C++20 coroutine library a user might pick instead: 64-byte sends from QP a to QP b
// of one loopback, IN_FLIGHT senders each awaiting one send at a time, and twice as
// many receivers each awaiting one receive at a time, so that receives stay posted
// ahead of the sends. rdmapp's own design is kept: a thread busy-polls the CQ and
// hands each completion to a pool of worker threads, which resume the coroutines.
//
// The project ships none of rdmapp's code: bench/run.sh builds this file only when
// RDMAPP_DIR names a checkout the user fetched.
//
//   rdmapp_throughput [-i IN_FLIGHT] [MESSAGES]
//
// Defaults: 64 in flight, 100000 messages. Device: the first one (rxe0 in the test
// VM). The output line has qp_throughput's shape, so that the benchmark scripts read
// both alike (rdmapp reports no CQ events or ack calls: 0).
#include <rdmapp/rdmapp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace {

struct totals {
    long total = 0;
    std::atomic<long> sends_started{0};
    std::atomic<long> receives_started{0};
    std::atomic<long> received{0};
};

rdmapp::task<void> sender(std::shared_ptr<rdmapp::qp> a, std::shared_ptr<rdmapp::local_mr> mr,
                          totals& t) {
    while (t.sends_started.fetch_add(1) < t.total)
        co_await a->send(mr);
}

rdmapp::task<void> receiver(std::shared_ptr<rdmapp::qp> b, std::shared_ptr<rdmapp::local_mr> mr,
                            totals& t) {
    while (t.receives_started.fetch_add(1) < t.total) {
        co_await b->recv(mr);
        t.received.fetch_add(1);
    }
}

rdmapp::deserialized_qp address_of(const rdmapp::qp& qp) {
    const std::vector<std::uint8_t> bytes = qp.serialize();
    return rdmapp::deserialized_qp::deserialize(bytes.begin());
}

} // namespace

int main(int argc, char** argv) {
    int in_flight = 64;
    long messages = 100000;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-i" && i + 1 < argc) {
            in_flight = std::atoi(argv[++i]);
        } else if (arg == "-h" || arg == "--help") {
            std::printf("usage: rdmapp_throughput [-i IN_FLIGHT] [MESSAGES]\n");
            return 0;
        } else {
            messages = std::atol(arg.c_str());
        }
    }
    // Each QP's queues hold 128 work requests (rdmapp's fixed size): 2 x IN_FLIGHT
    // receives at most.
    if (in_flight < 1 || in_flight > 64 || messages < 1) {
        std::fprintf(stderr, "rdmapp_throughput: IN_FLIGHT 1 to 64, MESSAGES at least 1\n");
        return 2;
    }
    try {
        auto device = std::make_shared<rdmapp::device>(0, 1);
        auto pd = std::make_shared<rdmapp::pd>(device);
        // Room for every receive and send outstanding at once.
        auto cq = std::make_shared<rdmapp::cq>(device, 512);
        auto poller = std::make_shared<rdmapp::cq_poller>(cq);
        auto a = std::make_shared<rdmapp::qp>(pd, cq);
        const auto to_a = address_of(*a);
        auto b = std::make_shared<rdmapp::qp>(to_a.header.lid, to_a.header.qp_num,
                                              to_a.header.sq_psn, to_a.header.gid, pd, cq);
        const auto to_b = address_of(*b);
        a->rtr(to_b.header.lid, to_b.header.qp_num, to_b.header.sq_psn, to_b.header.gid);
        a->rts();

        std::vector<char> send_bytes(64, 'x'), recv_bytes(64);
        auto send_mr =
            std::make_shared<rdmapp::local_mr>(pd->reg_mr(send_bytes.data(), send_bytes.size()));
        auto recv_mr =
            std::make_shared<rdmapp::local_mr>(pd->reg_mr(recv_bytes.data(), recv_bytes.size()));

        totals t;
        t.total = messages;
        const auto start = std::chrono::steady_clock::now();
        // Kept, not detached: a detached rdmapp task frees its future as it ends.
        std::vector<rdmapp::task<void>> tasks;
        tasks.reserve(3 * static_cast<std::size_t>(in_flight));
        // The receivers first: each posts its receive before it suspends.
        for (int i = 0; i < 2 * in_flight; ++i)
            tasks.push_back(receiver(b, recv_mr, t));
        for (int i = 0; i < in_flight; ++i)
            tasks.push_back(sender(a, send_mr, t));
        for (auto& task : tasks)
            task.get_future().wait();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // A coroutine sets its future before it reaches its end, on a worker thread:
        // the threads are joined (the poller, then its executor's workers) before a
        // task is looked at again, so that each has ended. (An rdmapp task that has
        // not ended when destroyed waits on a future that get() has consumed.)
        poller.reset();
        for (auto& task : tasks)
            task.get_future().get(); // rethrows what a coroutine threw
        const long received = t.received.load();
        std::printf("rdmapp (a polling thread, worker threads), %d in flight: %ld messages, %ld "
                    "completions in %.3f s = %.0f completions/s, 0 events, 0 ack calls\n",
                    in_flight, received, 2 * received, elapsed, 2 * received / elapsed);
        return received == messages ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rdmapp_throughput: %s\n", e.what());
        return 1;
    }
}
