// Device removal: each test adds a soft-RoCE device of its own (rxe_rm on veth1) and
// deletes it while waits are pending. `rdma link delete` returns only once every
// context on the device is closed, in every process: a device shared with the other
// tests could be held by any of them (librdmacm keeps a context on every device it
// has seen until the process ends), and the delete would never finish when all
// tests run in one process. Every wait is bounded; a stuck delete fails the test.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/device_list.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "rxe_counters.hpp"
#include "stream_echo.hpp"
#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <rdma_asio/stream.hpp>
#include <rdma_asio/testing/run.hpp>

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace removal_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::errc;
using rdma_asio::event_type;
using rdma_asio::test::exit_result;
using rdma_asio::test::spawn;
using rdma_asio::test::wait_exit;

namespace {

constexpr const char* device_name = "rxe_rm";
constexpr const char* netdev = "veth1";     // the VM's, see test/vm/guest-setup.sh
constexpr const char* address = "10.0.0.2"; // veth1's

// How long `rdma link delete` may take once nothing holds the device.
constexpr auto delete_timeout = 15s;

exit_result run_bounded(const char* const argv[], std::chrono::milliseconds timeout) {
    const pid_t pid = spawn(argv);
    if (pid < 0)
        return exit_result{exit_result::how::exited, 127};
    return wait_exit(pid, timeout);
}

// The uverbs node (e.g. "uverbs1") of `name`, or "" when there is no such device.
std::string uverbs_node(const std::string& name) {
    rdma_asio::error_code ec;
    rdma_asio::device_list devices(ec);
    if (ec)
        return {};
    ibv_device* d = devices.find(name);
    return d != nullptr ? d->dev_name : "";
}

// How many descriptors of this process are open on /dev/infiniband/<node>.
int open_descriptors_on(const std::string& node) {
    namespace fs = std::filesystem;
    int n = 0;
    rdma_asio::error_code ec;
    const fs::path target = fs::path("/dev/infiniband") / node;
    for (const auto& entry : fs::directory_iterator("/proc/self/fd", ec)) {
        rdma_asio::error_code ignored;
        if (fs::read_symlink(entry.path(), ignored) == target)
            ++n;
    }
    return n;
}

// A soft-RoCE device added for one test and deleted by it (or, if the test ends
// early, by the destructor). Nothing of this process holds it when it is made.
class scratch_device {
public:
    scratch_device() {
        REQUIRE(std::filesystem::exists(std::string("/sys/class/net/") + netdev));
        const char* const add[] = {"rdma", "link",   "add",  device_name, "type",
                                   "rxe",  "netdev", netdev, nullptr};
        const exit_result added = run_bounded(add, 30s);
        INFO("rdma link add " << device_name << ": " << added.describe());
        REQUIRE(added.ok());
        present_ = true;
        node_ = uverbs_node(device_name);
        REQUIRE(!node_.empty());
        {
            rdma_asio::context ctx(device_name);
            REQUIRE(rdma_asio::test::wait_port_state(ctx.native_handle(), IBV_PORT_ACTIVE, 10s));
        }
        INFO("descriptors of this process on /dev/infiniband/" << node_);
        REQUIRE(open_descriptors_on(node_) == 0);
    }
    scratch_device(const scratch_device&) = delete;
    scratch_device& operator=(const scratch_device&) = delete;
    ~scratch_device() {
        if (present_ && !stuck_) {
            const char* const del[] = {"rdma", "link", "delete", device_name, nullptr};
            run_bounded(del, delete_timeout);
        }
    }

    const std::string& node() const noexcept { return node_; }

    /// Starts `rdma link delete`; finish_delete() waits for it.
    void start_delete() {
        const char* const del[] = {"rdma", "link", "delete", device_name, nullptr};
        deleter_ = spawn(del);
        REQUIRE(deleter_ > 0);
    }
    /// Waits (bounded) for the delete started by start_delete().
    exit_result finish_delete() {
        const exit_result r = wait_exit(deleter_, delete_timeout);
        stuck_ = r.state == exit_result::how::stuck;
        present_ = !r.ok();
        return r;
    }

private:
    std::string node_;
    pid_t deleter_ = -1;
    bool present_ = false;
    bool stuck_ = false;
};

// What a failed finish_delete() means.
std::string why_stuck(const exit_result& r, int own_descriptors) {
    return std::string("rdma link delete ") + device_name + ": " + r.describe() +
           "; the kernel waits until every context on the device is closed (descriptors "
           "this process still holds on it: " +
           std::to_string(own_descriptors) + ")";
}

} // namespace

TEST_CASE("rdma link delete: the waiting coroutine sees the removal, then the delete completes",
          "[async_event_stream][removal]") {
    scratch_device device;
    asio::io_context ioc;
    auto ctx = std::make_unique<rdma_asio::context>(device_name);
    auto stream = std::make_unique<rdma_asio::async_event_stream>(ioc, *ctx);
    REQUIRE(stream->watching_removal());

    event_type removal{};
    rdma_asio::error_code after;
    bool closed = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::async_event ev = co_await stream->async_next(asio::use_awaitable);
            removal = ev.type();
            auto [ec, none] =
                co_await stream->async_next(asio::experimental::as_tuple(asio::use_awaitable));
            after = ec;
            // What a program does on removal: close everything on the device.
            stream.reset();
            ctx.reset();
            closed = true;
        },
        asio::detached);
    ioc.poll();

    device.start_delete();
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         !closed && std::chrono::steady_clock::now() < deadline;)
        ioc.run_one_for(50ms);
    CHECK(removal == event_type::device_removed);
    CHECK(after == errc::device_removed);
    REQUIRE(closed);

    // The kernel finishes the delete once the context is closed.
    const exit_result deleted = device.finish_delete();
    INFO(why_stuck(deleted, open_descriptors_on(device.node())));
    CHECK(deleted.ok());
}

namespace {

// The child's side: two ids bound to the device's address, a listening one and a
// plain one; writes a byte to `ready` once they exist, then expects
// DEVICE_REMOVAL on each. Exit status 0 when both got it.
int cm_ids_see_removal(int ready) {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    rdma_asio::cm_id listener(channel);
    rdma_asio::cm_id plain(channel);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, address, &addr.sin_addr);
    listener.bind(reinterpret_cast<const sockaddr*>(&addr));
    listener.listen();
    plain.bind(reinterpret_cast<const sockaddr*>(&addr));
    if (plain.native_handle()->verbs == nullptr ||
        std::string(ibv_get_device_name(plain.native_handle()->verbs->device)) != device_name)
        return 7;

    rdma_asio::error_code request_ec;
    rdma_cm_event_type plain_event = RDMA_CM_EVENT_ESTABLISHED;
    int done = 0;
    listener.async_get_request([&](rdma_asio::error_code ec, rdma_asio::cm_id) {
        request_ec = ec;
        ++done;
    });
    plain.async_next([&](rdma_asio::error_code ec, rdma_asio::cm_event ev) {
        if (!ec)
            plain_event = ev.type();
        ++done;
    });
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1)
        return 3;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (done < 2 && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    if (done < 2)
        return 4;
    if (request_ec != errc::device_removed)
        return 5;
    if (plain_event != RDMA_CM_EVENT_DEVICE_REMOVAL)
        return 6;
    return 0;
}

} // namespace

TEST_CASE("rdma link delete: each cm id on the device gets DEVICE_REMOVAL", "[cm_id][removal]") {
    scratch_device device;
    // librdmacm keeps a context of its own on every device until the process ends,
    // and the delete waits for it: the ids live in a child process.
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_fds[0]);
        int status = 2;
        try {
            status = cm_ids_see_removal(pipe_fds[1]);
        } catch (...) {
        }
        ::_exit(status);
    }
    ::close(pipe_fds[1]);
    pollfd ready{pipe_fds[0], POLLIN, 0};
    const int polled = ::poll(&ready, 1, 10000);
    ::close(pipe_fds[0]);
    if (polled != 1) {
        const exit_result early = wait_exit(child, 1s);
        FAIL("the child never made its ids: " << early.describe());
    }

    device.start_delete();
    const exit_result child_status = wait_exit(child, 20s);
    // 4: no event; 5: the listener's wait; 6: the other id's; 7: bound to another device
    INFO("child: " << child_status.describe());
    CHECK(child_status.ok());
    const exit_result deleted = device.finish_delete();
    INFO(why_stuck(deleted, open_descriptors_on(device.node())));
    CHECK(deleted.ok());
}

TEST_CASE("rdma link delete: CQ waits end with device_removed without an event stream",
          "[completion_queue][removal]") {
    scratch_device device;
    asio::io_context ioc;
    auto ctx = std::make_unique<rdma_asio::context>(device_name);
    auto channel = std::make_unique<rdma_asio::completion_channel>(ioc, *ctx);
    REQUIRE(channel->watching_removal());
    auto polled = std::make_unique<rdma_asio::completion_queue>(*channel, 4);
    auto waited = std::make_unique<rdma_asio::completion_queue>(*channel, 4);
    std::array<ibv_wc, 4> wcs;
    rdma_asio::error_code poll_ec, wait_ec, later_ec;
    int done = 0;
    polled->async_poll(wcs, [&](rdma_asio::error_code ec, std::size_t) { poll_ec = ec, ++done; });
    waited->request_notify();
    waited->async_wait([&](rdma_asio::error_code ec) { wait_ec = ec, ++done; });
    ioc.poll();
    REQUIRE(done == 0); // both wait on an empty, armed CQ

    device.start_delete();
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         done < 2 && std::chrono::steady_clock::now() < deadline;)
        ioc.run_one_for(50ms);
    CHECK(poll_ec == errc::device_removed);
    CHECK(wait_ec == errc::device_removed);
    REQUIRE(done == 2);
    // Removal is terminal: a later wait fails at once.
    polled->async_poll(wcs, [&](rdma_asio::error_code ec, std::size_t) { later_ec = ec, ++done; });
    ioc.restart();
    ioc.run_for(2s);
    CHECK(done == 3);
    CHECK(later_ec == errc::device_removed);

    // What a program does then: close everything on the device.
    polled.reset();
    waited.reset();
    channel.reset();
    ctx.reset();
    const exit_result deleted = device.finish_delete();
    INFO(why_stuck(deleted, open_descriptors_on(device.node())));
    CHECK(deleted.ok());
}

namespace {

// How long a stream's operations may take to end once the device is deleted (the
// bound docs/failure-behaviour.md states).
constexpr auto stream_removal_bound = 10s;

int open_descriptors() {
    int n = 0;
    rdma_asio::error_code ec;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/fd", ec))
        ++n;
    return n;
}

// How a stream end's operations ended under the removal: with the device's error,
// or disconnected, when the peer (on the same device) went first.
bool ended_by_removal(const rdma_asio::error_code& ec) {
    return ec == errc::device_removed || ec == errc::disconnected;
}

// The child's side: `pairs` stream pairs on the device, both ends here, each server
// end echoing and each client end asking through it; writes a byte to `ready` once
// every client has had an echo. Then waits (bounded) until every stream's
// operations ended, closes everything on the device as a program does, and writes
// to `report` how each ended, its pinned memory and its descriptors.
// Exit status 0 when every end ended within the bound, each pair saw
// device_removed, and the pinned memory is back where it was; 3: `ready` could
// not be written; 4: not every end ended within the bound; 5: an end ended with
// another error, or a pair without device_removed; 6: pinned memory left; 8: the
// pairs did not open.
int streams_see_removal(int ready, int report, std::size_t pairs) {
    const std::size_t pinned_before = rdma_asio::test::pinned_kib();
    const int descriptors_before = open_descriptors();
    asio::io_context ioc(1);
    const asio::ip::tcp::endpoint at(asio::ip::make_address(address), 18936);
    auto acceptor = std::make_unique<rdma_asio::acceptor>(ioc, at);
    std::vector<std::unique_ptr<rdma_asio::test::served>> slots;
    asio::co_spawn(ioc, rdma_asio::test::serve_echo(*acceptor, {}, slots), asio::detached);
    std::vector<rdma_asio::stream> clients;
    clients.reserve(pairs);
    std::vector<rdma_asio::test::asker> asked(pairs);
    const bool stop = false;
    // One connect at a time: client i's peer is the ith stream accepted.
    for (std::size_t i = 0; i < pairs; ++i) {
        rdma_asio::stream& s = clients.emplace_back(ioc);
        rdma_asio::error_code connected = asio::error::would_block;
        rdma_asio::async_connect(s, at, [&](rdma_asio::error_code ec) { connected = ec; });
        if (!rdma_asio::testing::run_until(
                ioc, [&] { return connected != asio::error::would_block && slots.size() > i; },
                30s) ||
            connected)
            return 8;
        asio::co_spawn(ioc, rdma_asio::test::ask_echoes(s, i, stop, asked[i]), asio::detached);
    }
    auto all = [&](auto&& holds) {
        for (std::size_t i = 0; i < pairs; ++i)
            if (!holds(*slots[i], asked[i]))
                return false;
        return true;
    };
    if (!rdma_asio::testing::run_until(
            ioc, [&] { return all([](auto&, auto& a) { return a.requests > 0; }); }, 30s))
        return 8;
    const std::size_t pinned_open = rdma_asio::test::pinned_kib();
    const int descriptors_open = open_descriptors();
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1)
        return 3;

    const auto deleted_at = std::chrono::steady_clock::now();
    const bool ended = rdma_asio::testing::run_until(
        ioc, [&] { return all([](auto& s, auto& a) { return s.done && a.done; }); },
        stream_removal_bound);
    const auto ended_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - deleted_at)
                              .count();
    std::size_t removed = 0, disconnected = 0, other = 0, pairs_without_removal = 0;
    for (std::size_t i = 0; i < pairs; ++i) {
        for (const rdma_asio::error_code& ec : {slots[i]->ended, asked[i].failed}) {
            removed += ec == errc::device_removed;
            disconnected += ec == errc::disconnected;
            other += !ended_by_removal(ec);
        }
        pairs_without_removal +=
            slots[i]->ended != errc::device_removed && asked[i].failed != errc::device_removed;
    }
    // What a program does then: close everything on the device.
    clients.clear();
    acceptor.reset();
    ioc.restart();
    ioc.poll();
    const std::size_t pinned_after = rdma_asio::test::pinned_kib();
    const int descriptors_after = open_descriptors();
    std::ostringstream out;
    out << pairs << " pairs; every end's operations ended: " << (ended ? "yes" : "no") << ", "
        << ended_ms << " ms after the delete began; device_removed " << removed
        << ", disconnected (the peer went first) " << disconnected << ", other " << other
        << ", pairs without device_removed " << pairs_without_removal << "; pinned KiB "
        << pinned_before << " before, " << pinned_open << " open, " << pinned_after
        << " closed; descriptors " << descriptors_before << " before, " << descriptors_open
        << " open, " << descriptors_after << " closed";
    const std::string text = out.str();
    if (::write(report, text.data(), text.size()) < 0)
        return 3;
    if (!ended)
        return 4;
    if (other != 0 || pairs_without_removal != 0)
        return 5;
    return pinned_after == pinned_before ? 0 : 6;
}

} // namespace

TEST_CASE("rdma link delete under streams carrying traffic: every stream end's operations end "
          "within the stated bound, each pair's with device_removed, and closing them gives "
          "back every pinned page",
          "[stream][removal]") {
    scratch_device device;
    // librdmacm keeps a context on the device until the process ends, and the
    // delete waits for it: the streams live in a child process.
    int ready_fds[2], report_fds[2];
    REQUIRE(::pipe(ready_fds) == 0);
    REQUIRE(::pipe(report_fds) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(ready_fds[0]);
        ::close(report_fds[0]);
        int status = 2;
        try {
            status = streams_see_removal(ready_fds[1], report_fds[1], 16);
        } catch (...) {
        }
        ::_exit(status);
    }
    ::close(ready_fds[1]);
    ::close(report_fds[1]);
    pollfd ready{ready_fds[0], POLLIN, 0};
    const int polled = ::poll(&ready, 1, 90000);
    ::close(ready_fds[0]);
    if (polled != 1) {
        ::close(report_fds[0]);
        const exit_result early = wait_exit(child, 1s);
        FAIL("the child never had its streams carrying traffic: " << early.describe());
    }

    device.start_delete();
    const exit_result child_status = wait_exit(child, 30s);
    std::string report;
    char chunk[512];
    for (ssize_t n; (n = ::read(report_fds[0], chunk, sizeof chunk)) > 0;)
        report.append(chunk, static_cast<std::size_t>(n));
    ::close(report_fds[0]);
    std::printf("streams under removal: %s\n", report.c_str());
    // 4: not every end ended in time; 5: another error; 6: pinned memory left
    INFO("child: " << child_status.describe() << "; " << report);
    CHECK(child_status.ok());
    const exit_result deleted = device.finish_delete();
    INFO(why_stuck(deleted, open_descriptors_on(device.node())));
    CHECK(deleted.ok());
}

// What a queue pair or a shared receive queue needs on the device, made as a
// program makes it; release() lets go of it in the order the delete needs (the
// objects made on it go first).
struct device_verbs {
    explicit device_verbs(asio::io_context& ioc)
        : ctx(std::make_unique<rdma_asio::context>(device_name)),
          pd(std::make_unique<rdma_asio::protection_domain>(*ctx)),
          channel(std::make_unique<rdma_asio::completion_channel>(ioc, *ctx)),
          cq(std::make_unique<rdma_asio::completion_queue>(*channel, 16)), memory(4 * 64),
          mr(std::make_unique<rdma_asio::memory_region>(*pd, asio::buffer(memory),
                                                        IBV_ACCESS_LOCAL_WRITE)) {}

    rdma_asio::registered_buffer slot(std::size_t i) { return mr->at(i * 64, 64); }
    // Connects `qp` to itself: receives are posted and stay outstanding.
    void connect_to_itself(rdma_asio::queue_pair& qp) {
        rdma_asio::test::connect_rc(ctx->native_handle(), qp.native_handle(),
                                    qp.native_handle()->qp_num);
    }
    void release() {
        mr.reset();
        cq.reset();
        channel.reset();
        pd.reset();
        ctx.reset();
    }

    std::unique_ptr<rdma_asio::context> ctx;
    std::unique_ptr<rdma_asio::protection_domain> pd;
    std::unique_ptr<rdma_asio::completion_channel> channel;
    std::unique_ptr<rdma_asio::completion_queue> cq;
    std::vector<std::byte> memory;
    std::unique_ptr<rdma_asio::memory_region> mr;
    std::vector<rdma_asio::error_code> ends; // of the operations, as they end
    auto record() {
        return [this](rdma_asio::error_code ec, std::size_t) { ends.push_back(ec); };
    }
};

// Deletes the device under the four operations `f` records, pending: each ends
// once with device_removed, and the one `start_later` starts then ends at once
// with it too.
void delete_under_four(scratch_device& device, asio::io_context& ioc, device_verbs& f,
                       const std::function<void()>& start_later) {
    ioc.poll();
    REQUIRE(f.ends.empty());
    device.start_delete();
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         f.ends.size() < 4 && std::chrono::steady_clock::now() < deadline;)
        ioc.run_one_for(50ms);
    REQUIRE(f.ends.size() == 4);
    for (const auto& ec : f.ends)
        CHECK(ec == errc::device_removed);
    start_later();
    ioc.restart();
    ioc.run_for(1s);
    REQUIRE(f.ends.size() == 5);
    CHECK(f.ends[4] == errc::device_removed);
}

// Once everything on the device is released: the delete finishes.
void check_delete_finishes(scratch_device& device) {
    const exit_result deleted = device.finish_delete();
    INFO(why_stuck(deleted, open_descriptors_on(device.node())));
    CHECK(deleted.ok());
}

TEST_CASE("rdma link delete: queue_pair operations outstanding end once with device_removed",
          "[queue_pair][removal]") {
    scratch_device device;
    asio::io_context ioc;
    device_verbs f(ioc);
    auto qp = std::make_unique<rdma_asio::queue_pair>(*f.pd, *f.cq, *f.cq);
    f.connect_to_itself(*qp);
    for (std::size_t i = 0; i < 4; ++i)
        qp->async_receive(f.slot(i), f.record());
    delete_under_four(device, ioc, f, [&] { qp->async_send(f.slot(0), f.record()); });
    qp.reset();
    f.release();
    check_delete_finishes(device);
}

TEST_CASE("rdma link delete: a shared receive queue's posted receives end once with "
          "device_removed",
          "[shared_receive_queue][removal]") {
    scratch_device device;
    asio::io_context ioc;
    device_verbs f(ioc);
    auto srq = std::make_unique<rdma_asio::shared_receive_queue>(ioc.get_executor(), *f.pd,
                                                                 rdma_asio::srq_options{});
    // A queue pair on it, connected to itself: the SRQ's receives stay posted, and
    // reach their operations through its receive CQ.
    auto qp = std::make_unique<rdma_asio::queue_pair>(*f.pd, *f.cq, *f.cq, *srq);
    f.connect_to_itself(*qp);
    for (std::size_t i = 0; i < 4; ++i)
        srq->async_receive(f.slot(i), f.record());
    ioc.poll();
    REQUIRE(srq->posted() == 4);
    delete_under_four(device, ioc, f, [&] { srq->async_receive(f.slot(0), f.record()); });
    qp.reset();
    srq.reset();
    f.release();
    check_delete_finishes(device);
}

} // namespace removal_rxe_test
