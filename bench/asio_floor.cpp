// What Asio itself costs per message in qp_throughput's shapes, with the device and
// rdma_asio taken out: two chains (a sender and a receiver), each starting one
// operation of Asio's own at a time, a read of a posix::stream_descriptor whose
// data is there when it starts (an eventfd in semaphore mode that always holds a
// count), as a work completion is there when a queue pair's CQ is polled. Asio
// reads at once and posts the completion, the path of any of its operations that
// finds its result ready. An operation of an Asio program cannot cost less, so this
// is the floor under a queue pair operation's instructions (docs/performance.md,
// "The floor under a queue pair operation").
//
//   asio_floor VARIANT MESSAGES
//
//   co   C++20 coroutines awaiting each read (use_awaitable, any_io_executor):
//        qp_throughput -o's shape
//   cb   completion handlers that start the next read (any_io_executor):
//        qp_throughput -h's shape
//
// A message is one operation of each chain (one read(2) each, in the count as the
// C loop's doorbell write is in its). Runs on the host: no device, one
// io_context thread. Prints the messages per second; instructions per message are
// callgrind's difference between two run lengths (bench/host-measures.sh's method).
#include "asio_alias.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/eventfd.h>

namespace {

using descriptor = asio::posix::stream_descriptor; // on asio::any_io_executor

asio::awaitable<void> co_chain(descriptor& fd, long messages, long& done) {
    std::uint64_t count = 0;
    for (long i = 0; i < messages; ++i) {
        co_await fd.async_read_some(asio::buffer(&count, sizeof count), asio::use_awaitable);
        ++done;
    }
}

struct cb_chain {
    descriptor* fd;
    long left;
    long* done;
    std::uint64_t* count;
    void start() {
        fd->async_read_some(asio::buffer(count, sizeof *count),
                            [self = *this](rdma_asio::error_code, std::size_t) mutable {
                                ++*self.done;
                                if (--self.left > 0)
                                    self.start();
                            });
    }
};

// An eventfd that reads 1 at every read, `messages` times (EFD_SEMAPHORE).
descriptor always_ready(asio::io_context& ioc, long messages) {
    const int fd = ::eventfd(static_cast<unsigned>(messages), EFD_SEMAPHORE | EFD_NONBLOCK);
    if (fd < 0) {
        std::perror("eventfd");
        std::exit(1);
    }
    return descriptor(ioc, fd);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3 || (std::strcmp(argv[1], "co") != 0 && std::strcmp(argv[1], "cb") != 0)) {
        std::fprintf(stderr, "usage: asio_floor co|cb MESSAGES\n");
        return 2;
    }
    const bool coroutines = std::strcmp(argv[1], "co") == 0;
    const long messages = std::atol(argv[2]);
    asio::io_context ioc(1);
    descriptor sender = always_ready(ioc, messages), receiver = always_ready(ioc, messages);
    long done = 0;
    std::uint64_t counts[2] = {};
    const auto begin = std::chrono::steady_clock::now();
    if (coroutines) {
        asio::co_spawn(ioc, co_chain(sender, messages, done), asio::detached);
        asio::co_spawn(ioc, co_chain(receiver, messages, done), asio::detached);
    } else if (messages > 0) {
        cb_chain{&sender, messages, &done, &counts[0]}.start();
        cb_chain{&receiver, messages, &done, &counts[1]}.start();
    }
    ioc.run();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - begin;
    std::printf("%s: %ld operations, %.0f messages/s\n", argv[1], done,
                took.count() > 0 ? static_cast<double>(done) / 2 / took.count() : 0.0);
    return done == 2 * messages ? 0 : 1;
}
