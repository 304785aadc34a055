// What a CQ with a spin budget costs once traffic stops: runs one-at-a-time
// loopback sends through two CQs (send and receive) with the given budget, long
// enough for an adaptive budget to learn the gap and spin, then stops sending and
// measures the CPU time (getrusage) the process uses over an idle window while
// both CQs' async_poll waits stay pending. A budget that ends (fixed, adaptive)
// should cost nothing then: the waits arm and sleep. `busy` (a budget that does
// not run out, as rc_pingpong without -e) is the control that spends the window.
//
//   idle_cpu MODE [TRAFFIC_SECONDS [IDLE_SECONDS]]
//   MODE: adaptive:USEC | fixed:USEC | busy; defaults 2 and 10 seconds.
//   Device: $RDMA_ASIO_TEST_DEVICE or rxe0.
// Prints one line; exit status 1 when the traffic failed or a wait ended during
// the idle window (then the figure would not be what it claims), 2 on bad usage.
#include "loopback.h"

#include <rdma_asio/completion_queue.hpp>

#include "asio_alias.hpp"

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

std::optional<rdma_asio::spin_budget> parse_mode(const std::string& mode) {
    if (mode == "busy")
        return rdma_asio::spin_budget::busy();
    const auto colon = mode.find(':');
    if (colon == std::string::npos)
        return std::nullopt;
    char* end = nullptr;
    const char* number = mode.c_str() + colon + 1;
    const unsigned long usec = std::strtoul(number, &end, 10);
    if (end == number || *end != '\0' || usec == 0 || usec > 1000000)
        return std::nullopt;
    const std::chrono::microseconds limit(usec);
    const std::string kind = mode.substr(0, colon);
    if (kind == "fixed")
        return rdma_asio::spin_budget::fixed(limit);
    if (kind == "adaptive")
        return rdma_asio::spin_budget::adaptive(limit);
    return std::nullopt;
}

double seconds(const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6;
}

struct cpu_time {
    double user = 0, system = 0;
    static cpu_time now() {
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        return {seconds(ru.ru_utime), seconds(ru.ru_stime)};
    }
};

// The traffic and the idle window, on one io_context thread.
class run {
public:
    run(rdma_asio::completion_queue& send_cq, rdma_asio::completion_queue& recv_cq,
        bench_loopback& lb, clock_type::duration traffic, clock_type::duration idle)
        : send_cq_(send_cq), recv_cq_(recv_cq), lb_(lb), traffic_(traffic), idle_(idle),
          timer_(send_cq.get_executor()) {}

    void start() {
        traffic_end_ = clock_type::now() + traffic_;
        if (bench_post_recv(lb_.b, lb_.mr, 0) != 0 || bench_post_send(lb_.a, lb_.mr, 0) != 0) {
            std::fprintf(stderr, "idle_cpu: posting the first message failed\n");
            return;
        }
        ++sent_;
        asio::co_spawn(send_cq_.get_executor(), sender(), asio::detached);
        asio::co_spawn(recv_cq_.get_executor(), receiver(), asio::detached);
    }

    bool failed() const { return failed_; }
    bool measured() const { return measured_; }
    long messages() const { return received_; }
    double traffic_seconds() const { return traffic_seconds_; }
    double idle_seconds() const { return idle_seconds_; }
    cpu_time idle_cpu() const {
        return {after_.user - before_.user, after_.system - before_.system};
    }

private:
    // Send completions; one message in flight, so the gap between completions is
    // a round trip and an adaptive budget learns to spin for it.
    asio::awaitable<void> sender() {
        std::array<ibv_wc, 4> wcs;
        for (;;) {
            ++pending_;
            auto [ec, n] = co_await send_cq_.async_poll(
                wcs, asio::bind_cancellation_slot(stop_send_.slot(), use_tuple));
            --pending_;
            if (!wait_ended(ec, wcs.data(), n))
                co_return;
            completed_sends_ += static_cast<long>(n);
            maybe_idle();
        }
    }

    // Receives: each one reposts its receive and sends the next message until
    // the traffic time is up.
    asio::awaitable<void> receiver() {
        std::array<ibv_wc, 4> wcs;
        for (;;) {
            ++pending_;
            auto [ec, n] = co_await recv_cq_.async_poll(
                wcs, asio::bind_cancellation_slot(stop_recv_.slot(), use_tuple));
            --pending_;
            if (!wait_ended(ec, wcs.data(), n))
                co_return;
            received_ += static_cast<long>(n);
            if (clock_type::now() < traffic_end_) {
                if (bench_post_recv(lb_.b, lb_.mr, 0) != 0 ||
                    bench_post_send(lb_.a, lb_.mr, 0) != 0) {
                    fail("posting a message failed");
                    co_return;
                }
                ++sent_;
            }
            maybe_idle();
        }
    }

    // False when the coroutine ends: cancelled after the idle window, or a failure.
    bool wait_ended(rdma_asio::error_code ec, const ibv_wc* wcs, std::size_t n) {
        if (ec == asio::error::operation_aborted && measured_)
            return false;
        if (ec) {
            fail("async_poll: " + ec.message());
            return false;
        }
        if (idle_started_) {
            fail("a completion arrived during the idle window");
            return false;
        }
        for (std::size_t i = 0; i < n; ++i)
            if (wcs[i].status != IBV_WC_SUCCESS) {
                fail(std::string("work completion: ") + ibv_wc_status_str(wcs[i].status));
                return false;
            }
        return true;
    }

    // Once every message sent has completed on both CQs and no more will be sent,
    // the two waits just started are pending: measure the idle window from now.
    void maybe_idle() {
        if (idle_started_ || clock_type::now() < traffic_end_ || received_ < sent_ ||
            completed_sends_ < sent_)
            return;
        idle_started_ = true;
        const auto now = clock_type::now();
        traffic_seconds_ = std::chrono::duration<double>(now - (traffic_end_ - traffic_)).count();
        idle_start_ = now;
        before_ = cpu_time::now();
        timer_.expires_after(idle_);
        timer_.async_wait([this](rdma_asio::error_code) { end_idle(); });
    }

    void end_idle() {
        after_ = cpu_time::now();
        idle_seconds_ = std::chrono::duration<double>(clock_type::now() - idle_start_).count();
        // Both coroutines are at a co_await of async_poll (the handler of the
        // one that has not reached it yet has not run either: it would count).
        if (pending_ != 2 && !failed_)
            fail("the waits were not both pending at the end of the idle window");
        measured_ = !failed_;
        stop();
    }

    // Ends both waits. Per-operation cancellation, not the CQs' cancel(): that
    // one reaches only a wait that sleeps on the channel, so a spinning wait
    // would go on spinning (for ever with the busy budget).
    void stop() {
        stop_send_.emit(asio::cancellation_type::terminal);
        stop_recv_.emit(asio::cancellation_type::terminal);
    }

    void fail(const std::string& what) {
        if (!failed_)
            std::fprintf(stderr, "idle_cpu: %s\n", what.c_str());
        failed_ = true;
        timer_.cancel();
        stop();
    }

    rdma_asio::completion_queue& send_cq_;
    rdma_asio::completion_queue& recv_cq_;
    bench_loopback& lb_;
    clock_type::duration traffic_, idle_;
    asio::steady_timer timer_;
    asio::cancellation_signal stop_send_, stop_recv_;
    clock_type::time_point traffic_end_{}, idle_start_{};
    long sent_ = 0, completed_sends_ = 0, received_ = 0;
    int pending_ = 0;
    bool idle_started_ = false, measured_ = false, failed_ = false;
    double traffic_seconds_ = 0, idle_seconds_ = 0;
    cpu_time before_, after_;
};

double parse_seconds(const char* text) {
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    return end != text && *end == '\0' && s > 0 && s <= 3600 ? s : -1;
}

} // namespace

int main(int argc, char* argv[]) {
    const char* usage = "usage: idle_cpu adaptive:USEC|fixed:USEC|busy [TRAFFIC_SECONDS "
                        "[IDLE_SECONDS]]\n";
    if (argc < 2 || argc > 4) {
        std::fputs(usage, stderr);
        return 2;
    }
    const auto budget = parse_mode(argv[1]);
    const double traffic_s = argc > 2 ? parse_seconds(argv[2]) : 2;
    const double idle_s = argc > 3 ? parse_seconds(argv[3]) : 10;
    if (!budget || traffic_s <= 0 || idle_s <= 0) {
        std::fputs(usage, stderr);
        return 2;
    }
    const char* name = std::getenv("RDMA_ASIO_TEST_DEVICE");
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(name ? name : "rxe0");
        rdma_asio::completion_channel channel(ioc, ctx);
        const rdma_asio::cq_options options{64, false, *budget};
        rdma_asio::completion_queue send_cq(channel, 16, options), recv_cq(channel, 16, options);
        bench_loopback lb;
        if (bench_loopback_init(&lb, ctx.native_handle(), send_cq.native_handle(),
                                recv_cq.native_handle(), 1) != 0)
            return 1;
        const auto to_duration = [](double s) {
            return std::chrono::duration_cast<clock_type::duration>(
                std::chrono::duration<double>(s));
        };
        run r(send_cq, recv_cq, lb, to_duration(traffic_s), to_duration(idle_s));
        r.start();
        ioc.run();
        const auto s = send_cq.counters(), c = recv_cq.counters();
        bench_loopback_destroy(&lb);
        if (!r.measured())
            return 1;
        const cpu_time idle = r.idle_cpu();
        std::printf("idle_cpu %s: 2 waits pending for %.2f s: %.3f s CPU (user %.3f s, system "
                    "%.3f s); before: %ld messages in %.2f s, %llu spin hits, %llu events\n",
                    argv[1], r.idle_seconds(), idle.user + idle.system, idle.user, idle.system,
                    r.messages(), r.traffic_seconds(),
                    static_cast<unsigned long long>(s.spin_hits + c.spin_hits),
                    static_cast<unsigned long long>(s.events + c.events));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "idle_cpu: %s\n", e.what());
        return 1;
    }
}
