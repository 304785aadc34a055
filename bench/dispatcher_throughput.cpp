// Events per second through rdma_asio's event dispatcher alone, on this host (no
// RDMA device), against a bare asio::posix::stream_descriptor::async_wait + read
// loop doing the same work. bench/measure-host.sh runs it and counts instructions,
// syscalls and lock operations per event.
//
//   dispatcher_throughput VARIANT EVENTS [--thread] [--waiters=K] [--unsafe]
//
// Variants (cb: callbacks, co: C++20 coroutines with use_awaitable; any: the I/O
// object, and a coroutine's awaitable, on asio::any_io_executor, typed: on
// asio::io_context::executor_type, so that the cost of type erasure shows):
//   bare-cb-any bare-cb-typed bare-co-any bare-co-typed    stream_descriptor on an eventfd
//   rdma-cb-any rdma-cb-typed rdma-co-any rdma-co-typed    rdma_asio::basic_devx_eventfd
//   bare-many rdma-many      K waiters on one pipe (callbacks, any_io_executor)
//   bare-idle rdma-idle      a wait started and cancelled before any event (callbacks,
//                            any_io_executor): the cost of going idle and back
//
// One event per wait cycle, so that every event needs a wake-up. A completion
// channel signals while its consumer waits: the consumer has re-armed and gone
// back to its event loop, and the kernel's write raises the edge that wakes it.
// Here the consumer writes the event itself right after it has started its next
// wait (a coroutine through kicked(), which starts the wait with the awaitable's
// handler and then writes). So the event is never there when the wait starts (no
// wait completes on its initial read) and each one goes through the reactor:
// epoll_wait reports the fd, the wait completes, one read takes the event. Every
// variant pays the same write. (Posting the write instead would add a scheduler
// interrupt, an epoll_ctl and a second epoll_wait per event to both sides.)
//
// Without --thread the loop never sleeps in the kernel (epoll_wait finds the fd
// ready at once): deterministic, and what the instruction counts use. With
// --thread the consumer instead asks a second thread, blocked in read(2) on a
// request pipe, to write the event: the consumer then really sleeps in
// epoll_wait and is woken by another CPU's write, as by an interrupt.
//
// --unsafe runs the io_context with ASIO_CONCURRENCY_HINT_UNSAFE (one thread;
// Asio's scheduler takes no lock; rdma_asio's dispatcher still does).
//
// Many waiters (rdma-many, bare-many): K waits on one dispatcher, each for its own
// key (a byte read from a pipe, as a CQ event names its CQ); each event names a
// pseudo-random key, and the waiter that takes it waits again. The dispatcher
// hands the event to the first waiter of the key's object (its waits are indexed
// by object); the bare loop
// reads the byte and calls the handler of that key through a table, as a C loop
// that serves only the CQ the event names. No public I/O object has keyed waits on
// a host fd (the completion channel's need a device), so rdma-many drives
// detail::event_dispatcher through its own interface (open, async_next with a
// keyed matcher, close), as every I/O object does.
//
// Going idle (rdma-idle, bare-idle): each cycle starts a wait and cancels it at once;
// its handler (operation_aborted) starts the next cycle, and "events" counts cycles.
// rdma_asio holds a reactor wait on its fd only while someone waits, so that run()
// can return when nobody does: a cancelled last wait cancels the reactor wait too, and
// the next wait starts a new one. That is what a service pays each time a
// connection's waits are cancelled (a timer beside them, `||`, a stop signal) and
// nothing was pending. With epoll a cancelled wait ends at once, without a syscall;
// with io_uring the poll is removed by a cancel request, and the wait ends with the
// kernel's completion of both. The bare loop cancels its stream_descriptor's wait
// the same way.
//
// Prints "VARIANT: N events in S s = R events/s, M merged"; merged counts the
// wake-ups that found more than one event (should be 0). Figures, never a verdict.
#include <rdma_asio/detail/core/event_dispatcher.hpp>
#include <rdma_asio/detail/core/read_loop.hpp>
#if defined(RDMA_ASIO_HAVE_MLX5DV)
#include <rdma_asio/devx_eventfd.hpp>
#endif

#include "asio_alias.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using typed_executor = asio::io_context::executor_type;

// io_context's concurrency hints, as the flavour spells them.
#if RDMA_ASIO_USE_BOOST_ASIO
constexpr int hint_unsafe = BOOST_ASIO_CONCURRENCY_HINT_UNSAFE;
constexpr int hint_default = BOOST_ASIO_CONCURRENCY_HINT_DEFAULT;
#else
constexpr int hint_unsafe = ASIO_CONCURRENCY_HINT_UNSAFE;
constexpr int hint_default = ASIO_CONCURRENCY_HINT_DEFAULT;
#endif

struct stats {
    long events = 0;
    long merged = 0; // wake-ups that read a count > 1 (an event without its own wake-up)
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "dispatcher_throughput: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

// Writes the event into `target` (an eventfd: add 1; a pipe: the key byte),
// directly or through a second thread.
class producer {
public:
    producer(int target, bool is_eventfd, bool threaded) : target_(target), eventfd_(is_eventfd) {
        if (!threaded)
            return;
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0)
            die("pipe2");
        request_read_ = fds[0];
        request_write_ = fds[1];
        thread_ = std::thread([this] {
            std::uint8_t key;
            while (::read(request_read_, &key, 1) == 1)
                write_event(key);
        });
    }
    producer(const producer&) = delete;
    producer& operator=(const producer&) = delete;
    ~producer() {
        if (thread_.joinable()) {
            ::close(request_write_); // the thread's read returns 0
            thread_.join();
            ::close(request_read_);
        }
    }

    void kick(std::uint8_t key = 0) {
        if (request_write_ < 0)
            write_event(key);
        else if (::write(request_write_, &key, 1) != 1)
            die("write (request pipe)");
    }

private:
    void write_event(std::uint8_t key) {
        if (eventfd_ ? ::eventfd_write(target_, 1) != 0 : ::write(target_, &key, 1) != 1)
            die("write (event)");
    }

    int target_;
    bool eventfd_;
    int request_read_ = -1, request_write_ = -1;
    std::thread thread_;
};

// Starts a wait (`start(handler)`) with the completion token's handler, then writes
// the event: a coroutine cannot run code between the start of its wait and its
// suspension otherwise. The same wrapper for rdma_asio and the bare loop.
template <class Signature, class Start, class CompletionToken>
auto kicked(producer& p, Start start, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, Signature>(
        [&p, start](auto handler) mutable {
            start(std::move(handler));
            p.kick();
        },
        token);
}

int make_eventfd() {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        die("eventfd");
    return fd;
}

void count(stats& s, std::uint64_t value) {
    ++s.events;
    if (value > 1)
        ++s.merged;
}

// The bare loop's read: one read per wake-up, as the dispatcher does (it stops
// reading once nobody waits).
std::uint64_t read_eventfd(int fd) {
    eventfd_t value = 0;
    if (::eventfd_read(fd, &value) != 0)
        die("eventfd_read");
    return value;
}

// --- bare Asio ---------------------------------------------------------------

template <class Executor>
void bare_cb(asio::io_context& ioc, long n, bool threaded, stats& s) {
    const int fd = make_eventfd();
    producer p(fd, true, threaded);
    asio::posix::basic_stream_descriptor<Executor> d(Executor(ioc.get_executor()), fd);
    struct loop {
        producer& p;
        asio::posix::basic_stream_descriptor<Executor>& d;
        stats& s;
        long n;
        void start() {
            d.async_wait(asio::posix::stream_descriptor::wait_read,
                         [this](rdma_asio::error_code ec) {
                             if (ec)
                                 die(ec.message().c_str());
                             count(s, read_eventfd(d.native_handle()));
                             if (s.events < n)
                                 start();
                         });
            p.kick();
        }
    } l{p, d, s, n};
    l.start();
    ioc.run();
}

template <class Executor>
asio::awaitable<void, Executor>
bare_co_loop(producer& p, asio::posix::basic_stream_descriptor<Executor>& d, long n, stats& s) {
    while (s.events < n) {
        co_await kicked<void(rdma_asio::error_code)>(
            p,
            [&](auto&& h) {
                d.async_wait(asio::posix::stream_descriptor::wait_read, std::move(h));
            },
            asio::use_awaitable_t<Executor>{});
        count(s, read_eventfd(d.native_handle()));
    }
}

template <class Executor>
void bare_co(asio::io_context& ioc, long n, bool threaded, stats& s) {
    const int fd = make_eventfd();
    producer p(fd, true, threaded);
    asio::posix::basic_stream_descriptor<Executor> d(Executor(ioc.get_executor()), fd);
    asio::co_spawn(Executor(ioc.get_executor()), bare_co_loop(p, d, n, s),
                   [](std::exception_ptr e) {
                       if (e)
                           std::rethrow_exception(e);
                   });
    ioc.run();
}

// --- rdma_asio: devx_eventfd (an eventfd behind the dispatcher) ---------------

#if defined(RDMA_ASIO_HAVE_MLX5DV)
template <class Executor>
void rdma_cb(asio::io_context& ioc, long n, bool threaded, stats& s) {
    rdma_asio::basic_devx_eventfd<Executor> efd{Executor(ioc.get_executor())};
    producer p(efd.native_handle(), true, threaded);
    struct loop {
        producer& p;
        rdma_asio::basic_devx_eventfd<Executor>& efd;
        stats& s;
        long n;
        void start() {
            efd.async_wait([this](rdma_asio::error_code ec, std::uint64_t value) {
                if (ec)
                    die(ec.message().c_str());
                count(s, value);
                if (s.events < n)
                    start();
            });
            p.kick();
        }
    } l{p, efd, s, n};
    l.start();
    ioc.run();
}

template <class Executor>
asio::awaitable<void, Executor>
rdma_co_loop(producer& p, rdma_asio::basic_devx_eventfd<Executor>& efd, long n, stats& s) {
    while (s.events < n)
        count(s, co_await kicked<void(rdma_asio::error_code, std::uint64_t)>(
                     p, [&](auto&& h) { efd.async_wait(std::move(h)); },
                     asio::use_awaitable_t<Executor>{}));
}

template <class Executor>
void rdma_co(asio::io_context& ioc, long n, bool threaded, stats& s) {
    rdma_asio::basic_devx_eventfd<Executor> efd{Executor(ioc.get_executor())};
    producer p(efd.native_handle(), true, threaded);
    asio::co_spawn(Executor(ioc.get_executor()), rdma_co_loop(p, efd, n, s),
                   [](std::exception_ptr e) {
                       if (e)
                           std::rethrow_exception(e);
                   });
    ioc.run();
}
#endif

// --- many waiters on one pipe -------------------------------------------------

// The next key: a fixed pseudo-random sequence, so that the waiter an event names
// sits anywhere in the dispatcher's list, as the CQ an event names does.
struct key_sequence {
    std::uint32_t state = 12345;
    std::uint8_t next(int k) {
        state = state * 1103515245u + 12345u;
        return static_cast<std::uint8_t>((state >> 16) % static_cast<std::uint32_t>(k));
    }
};

// The object each key stands for, as a CQ event names its CQ.
std::array<char, 256> key_objects;

// A pipe whose bytes are events naming a key.
class pipe_source {
public:
    using value_type = std::uint8_t;
    // The event's object: the dispatcher indexes the waits by it.
    static const void* object_of(std::uint8_t key) noexcept { return &key_objects[key]; }
    explicit pipe_source(int fd) noexcept : fd_(fd) {}
    pipe_source(const pipe_source&) = delete;
    pipe_source& operator=(const pipe_source&) = delete;
    ~pipe_source() { close(); }

    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept { return fd_; }
    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        rdma_asio::detail::read_until_would_block<value_type>(sink, [this](value_type& key) {
            const ssize_t r = ::read(fd_, &key, 1);
            if (r == 1)
                return rdma_asio::detail::read_result::event();
            if (r == 0)
                return rdma_asio::detail::read_result::failed(
                    std::make_error_code(std::errc::broken_pipe));
            return rdma_asio::detail::read_result::from_errno(errno);
        });
    }
    void close() noexcept {
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }

private:
    int fd_;
};

// A wait for one key; key() is the key's object, as a CQ wait's is its CQ, and it
// accepts no other object's events (so the dispatcher may index it).
struct key_match {
    std::uint8_t wanted;
    bool operator()(std::uint8_t key) const noexcept { return key == wanted; }
    const void* key() const noexcept { return &key_objects[wanted]; }
    static constexpr bool only_own_events = true;
};

std::array<int, 2> make_pipe() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_NONBLOCK | O_CLOEXEC) != 0)
        die("pipe2");
    return fds;
}

void rdma_many(asio::io_context& ioc, long n, bool threaded, int k, stats& s) {
    using dispatcher = rdma_asio::detail::event_dispatcher<pipe_source>;
    const auto fds = make_pipe();
    auto d = std::make_shared<dispatcher>(asio::any_io_executor(ioc.get_executor()), fds[0]);
    rdma_asio::error_code ec;
    d->open(ec);
    if (ec)
        die(ec.message().c_str());
    producer p(fds[1], false, threaded);
    key_sequence keys;
    struct waiter {
        producer& p;
        dispatcher& d;
        key_sequence& keys;
        stats& s;
        long n;
        int k;
        std::uint8_t key;
        void start() {
            d.async_next(key_match{key}, [this](rdma_asio::error_code ec, std::uint8_t got) {
                // close() ends the other waits with operation_aborted: not counted.
                if (ec == asio::error::operation_aborted && s.events >= n)
                    return;
                if (ec)
                    die(ec.message().c_str());
                if (got != key)
                    die("an event for another key");
                ++s.events;
                if (s.events >= n) {
                    d.close();
                    return;
                }
                start();
                p.kick(keys.next(k));
            });
        }
    };
    std::vector<std::unique_ptr<waiter>> waiters;
    for (int i = 0; i < k; ++i)
        waiters.push_back(
            std::make_unique<waiter>(waiter{p, *d, keys, s, n, k, static_cast<std::uint8_t>(i)}));
    for (auto& w : waiters)
        w->start();
    p.kick(keys.next(k));
    ioc.run();
}

void bare_many(asio::io_context& ioc, long n, bool threaded, int k, stats& s) {
    const auto fds = make_pipe();
    producer p(fds[1], false, threaded);
    asio::posix::stream_descriptor d(ioc, fds[0]);
    key_sequence keys;
    // The handler of each key, called through the table.
    std::vector<std::function<void()>> handlers;
    for (int i = 0; i < k; ++i)
        handlers.emplace_back([&s] { ++s.events; });
    struct loop {
        producer& p;
        asio::posix::stream_descriptor& d;
        std::vector<std::function<void()>>& handlers;
        key_sequence& keys;
        stats& s;
        long n;
        int k;
        void start() {
            d.async_wait(asio::posix::stream_descriptor::wait_read,
                         [this](rdma_asio::error_code ec) {
                             if (ec)
                                 die(ec.message().c_str());
                             std::uint8_t key;
                             if (::read(d.native_handle(), &key, 1) != 1)
                                 die("read (pipe)");
                             handlers[key]();
                             if (s.events < n) {
                                 start();
                                 p.kick(keys.next(k));
                             }
                         });
        }
    } l{p, d, handlers, keys, s, n, k};
    l.start();
    p.kick(keys.next(k));
    ioc.run();
}

// --- going idle: a wait started and cancelled, no event ---------------------------

void expect_aborted(rdma_asio::error_code ec) {
    if (ec != asio::error::operation_aborted)
        die(ec ? ec.message().c_str() : "a cancelled wait completed without an error");
}

// Cycles of a wait started by `wait(object, handler)` and cancelled at once.
template <class Object, class Wait>
struct idle_loop {
    Object& object;
    Wait wait;
    stats& s;
    long n;
    void start() {
        wait(object, [this](rdma_asio::error_code ec, auto&&...) {
            expect_aborted(ec);
            if (++s.events < n)
                start();
        });
        object.cancel();
    }
};

template <class Object, class Wait>
void idle_cycles(asio::io_context& ioc, Object& object, Wait wait, long n, stats& s) {
    idle_loop<Object, Wait> l{object, wait, s, n};
    l.start();
    ioc.run();
}

void bare_idle(asio::io_context& ioc, long n, bool, stats& s) {
    asio::posix::stream_descriptor d(ioc, make_eventfd());
    idle_cycles(
        ioc, d,
        [](auto& d, auto h) {
            d.async_wait(asio::posix::stream_descriptor::wait_read, std::move(h));
        },
        n, s);
}

#if defined(RDMA_ASIO_HAVE_MLX5DV)
void rdma_idle(asio::io_context& ioc, long n, bool, stats& s) {
    rdma_asio::devx_eventfd efd{ioc.get_executor()};
    idle_cycles(
        ioc, efd, [](auto& efd, auto h) { efd.async_wait(std::move(h)); }, n, s);
}
#endif

using runner = std::function<void(asio::io_context&, long, bool, int, stats&)>;

std::map<std::string, runner> variants() {
    std::map<std::string, runner> v;
    auto plain = [](void (*f)(asio::io_context&, long, bool, stats&)) {
        return [f](asio::io_context& ioc, long n, bool t, int, stats& s) { f(ioc, n, t, s); };
    };
    v["bare-cb-any"] = plain(bare_cb<asio::any_io_executor>);
    v["bare-cb-typed"] = plain(bare_cb<typed_executor>);
    v["bare-co-any"] = plain(bare_co<asio::any_io_executor>);
    v["bare-co-typed"] = plain(bare_co<typed_executor>);
#if defined(RDMA_ASIO_HAVE_MLX5DV)
    v["rdma-cb-any"] = plain(rdma_cb<asio::any_io_executor>);
    v["rdma-cb-typed"] = plain(rdma_cb<typed_executor>);
    v["rdma-co-any"] = plain(rdma_co<asio::any_io_executor>);
    v["rdma-co-typed"] = plain(rdma_co<typed_executor>);
    v["rdma-idle"] = plain(rdma_idle);
#endif
    v["bare-idle"] = plain(bare_idle);
    v["rdma-many"] = rdma_many;
    v["bare-many"] = bare_many;
    return v;
}

void usage(const std::map<std::string, runner>& v) {
    std::fprintf(stderr,
                 "usage: dispatcher_throughput VARIANT EVENTS [--thread] [--waiters=K] [--unsafe]\n"
                 "variants:");
    for (const auto& [name, f] : v)
        std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    std::exit(2);
}

} // namespace

int main(int argc, char* argv[]) {
    const auto v = variants();
    if (argc < 3)
        usage(v);
    const auto it = v.find(argv[1]);
    if (it == v.end()) {
        std::fprintf(stderr, "dispatcher_throughput: unknown variant %s%s\n", argv[1],
                     std::strncmp(argv[1], "rdma-", 5) == 0 ? " (built without mlx5dv?)" : "");
        usage(v);
    }
    char* end = nullptr;
    const long n = std::strtol(argv[2], &end, 10);
    if (*end != '\0' || n <= 0)
        usage(v);
    bool threaded = false;
    bool unsafe = false; // one thread, no locks: ASIO_CONCURRENCY_HINT_UNSAFE
    int k = 1;
    for (int i = 3; i < argc; ++i) {
        if (std::strcmp(argv[i], "--thread") == 0)
            threaded = true;
        else if (std::strcmp(argv[i], "--unsafe") == 0)
            unsafe = true;
        else if (std::strncmp(argv[i], "--waiters=", 10) == 0)
            k = std::atoi(argv[i] + 10);
        else
            usage(v);
    }
    const bool idle = std::strstr(argv[1], "-idle") != nullptr; // nothing to produce
    if (k < 1 || k > 256 || (unsafe && threaded) || (idle && threaded))
        usage(v);
    try {
        asio::io_context ioc(unsafe ? hint_unsafe : hint_default);
        stats s;
        const auto start = std::chrono::steady_clock::now();
        it->second(ioc, n, threaded, k, s);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("%s: %ld events in %.3f s = %.0f events/s, %ld merged\n", argv[1], s.events,
                    seconds, static_cast<double>(s.events) / seconds, s.merged);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dispatcher_throughput: %s\n", e.what());
        return 1;
    }
    return 0;
}
