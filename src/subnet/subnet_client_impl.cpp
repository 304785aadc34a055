#include "rdma_asio/detail/subnet/subnet_client_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <random>
#include <string>

namespace rdma_asio::detail {
namespace {

bool is_response(const sa::mad_buffer& mad) noexcept {
    return (mad[3] & 0x80) != 0;
}

// TIDs differ between runs, so the SA does not take a new client's requests for
// retries of an old one's.
std::uint32_t first_tid() {
    return std::random_device{}();
}

} // namespace

struct subnet_client_impl::pump_handler {
    std::weak_ptr<subnet_client_impl> self;
    void operator()(error_code ec, received_mad mad) const {
        if (auto s = self.lock())
            s->on_mad(ec, mad);
    }
};

struct subnet_client_impl::timer_handler {
    std::weak_ptr<subnet_client_impl> self;
    std::uint64_t generation;
    void operator()(error_code ec) const {
        if (ec)
            return; // superseded or closed
        if (auto s = self.lock())
            s->on_timer(generation);
    }
};

subnet_client_impl::subnet_client_impl(const executor_type& ex, const sa_subscriber::config& cfg)
    : ex_(ex), cfg_(cfg), fsm_(cfg, first_tid()), timer_(ex),
      results_(std::make_shared<results_dispatcher>(ex)),
      events_(std::make_shared<events_dispatcher>(ex)) {}

void subnet_client_impl::open(const std::string& ca_name, int port, error_code& ec,
                              std::string& what) {
    const std::string where =
        "CA " + (ca_name.empty() ? std::string("any") : ca_name) + ", port " + std::to_string(port);
    auto fail = [&](const error_code& error, const char* call) {
        ec = error;
        what = "rdma_asio::subnet_event_client::open: " + std::string(call) + " (" + where + ")";
    };
    // libibumad answers EIO for a CA or a port that does not exist: say which.
    auto fail_umad = [&](const error_code& error, const char* call) {
        fail(name_umad_error(error, ca_name, port, umad_port::list_cas(ca_name)), call);
    };
    const umad_port_info info = umad_port::query(ca_name, port, ec);
    if (ec)
        return fail_umad(ec, "umad_get_port");
    if (!info.infiniband) {
        ec = make_error_code(errc::no_subnet_manager);
        what = "rdma_asio::subnet_event_client::open: " + where + " is not InfiniBand";
        return;
    }
    port_.open(ca_name, port, ec);
    if (ec)
        return fail_umad(ec, "umad_open_port/umad_register");
    mads_ = std::make_shared<event_dispatcher<umad_source>>(ex_, port_);
    mads_->open(ec);
    // umad2sim's descriptors are not kernel fds: epoll refuses them.
    if (ec == asio::error::bad_descriptor || ec == asio::error::no_permission) {
        ec.clear();
        mads_->with_source([&](umad_source& s) { s.start_reader_thread(ec); });
        if (ec)
            return fail(ec, "starting the umad reader thread");
        mads_->open(ec);
    }
    if (ec)
        fail(ec, "registering the umad fd");
}

void subnet_client_impl::attach(const async_event_stream_ref& stream) {
    // SM_CHANGE and CLIENT_REREGISTER are seen under the stream's lock: the client
    // reacts from its own executor.
    std::weak_ptr<subnet_client_impl> weak = weak_from_this();
    event_subscription ports =
        stream.observe_ports([weak, ex = ex_](event_type type, int port_num) {
            asio::post(ex, [weak, type, port_num] {
                if (auto impl = weak.lock())
                    impl->on_port_event(type, port_num);
            });
        });
    std::lock_guard lock(mutex_);
    stream_ = stream;
    stream_ports_ = std::move(ports);
    events_->fail(asio::error::operation_not_supported);
}

std::uint64_t subnet_client_impl::start(sa_request kind, sm_event_mask mask,
                                        const std::vector<ibv_gid>& gids) {
    std::lock_guard lock(mutex_);
    sa_subscriber::actions actions;
    const auto now = clock::now();
    std::uint64_t op = 0;
    if (kind == sa_request::remove_all) {
        op = fsm_.start_unregister_all(now, actions);
    } else if (kind == sa_request::remove) {
        op = fsm_.start_unregister(mask, gids, now, actions);
    } else {
        // Fail before touching the registrations when nobody could answer.
        error_code ec = read_error_;
        if (!ec) {
            const umad_port_info info = port_.query(ec);
            if (!ec && info.sm_lid == 0)
                ec = make_error_code(errc::no_subnet_manager);
        }
        op = ec ? fsm_.reject(ec, actions) : fsm_.start_register(mask, gids, now, actions);
    }
    unanswered_.insert(op); // before carry_out_locked, which may answer it at once
    carry_out_locked(actions);
    return op;
}

void subnet_client_impl::forget(std::uint64_t op) {
    std::lock_guard lock(mutex_);
    if (unanswered_.contains(op)) {
        forgotten_.insert(op);
        return;
    }
    // The result is out. Its wait was aborted before taking it, or handed it back
    // as it was cancelled after taking it: either way it waits in results(), or
    // was dropped by close(). Take it now so that it does not stay queued.
    results_->async_next(match_op{op}, [](error_code, sa_op_result) {});
}

void subnet_client_impl::resubscribe() {
    std::lock_guard lock(mutex_);
    if (closed_)
        return;
    sa_subscriber::actions actions;
    fsm_.resubscribe(clock::now(), actions);
    carry_out_locked(actions);
}

void subnet_client_impl::on_port_event(event_type type, int port_num) {
    if (port_num == port_.port() &&
        (type == event_type::sm_change || type == event_type::client_reregister))
        resubscribe();
}

void subnet_client_impl::cancel() noexcept {
    results_->cancel();
    events_->cancel();
}

void subnet_client_impl::close() noexcept {
    std::vector<sa::mad_buffer> goodbyes;
    event_subscription stream_ports;
    std::optional<async_event_stream_ref> stream;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        closed_ = true;
        goodbyes = fsm_.abandon();
        // Best effort: there is nobody left to wait for the answers.
        error_code ec;
        const umad_port_info info = port_.query(ec);
        if (!ec && info.sm_lid != 0)
            for (const auto& mad : goodbyes)
                port_.send(mad, info.sm_lid, info.sm_sl, 0);
        ++timer_generation_;
        timer_.cancel();
        stream_ports = std::move(stream_ports_);
        stream.swap(stream_);
    }
    stream_ports.reset(); // outside our lock: it takes the stream's
    if (mads_)
        mads_->close();
    results_->close();
    events_->close();
    port_.close();
}

bool subnet_client_impl::uses_reader_thread() const {
    return mads_ && mads_->with_source([](umad_source& s) { return s.uses_reader_thread(); });
}

subnet_event_client_counters subnet_client_impl::counters() const {
    std::lock_guard lock(mutex_);
    return fsm_.counters();
}

bool subnet_client_impl::subscribed(std::uint16_t trap) const {
    std::lock_guard lock(mutex_);
    return fsm_.subscribed(trap);
}

// Sends, delivers and completes what the state machine asked for, then makes
// sure MADs are read and the timer runs while the state machine needs them.
void subnet_client_impl::carry_out_locked(sa_subscriber::actions& actions) {
    if (!actions.sends.empty()) {
        error_code ec;
        const umad_port_info info = port_.query(ec);
        // Without an SM LID nothing can be sent: the requests time out.
        if (!ec && info.sm_lid != 0) {
            // The kernel gives up on a request before fsm_ sends it again.
            const auto timeout_ms = static_cast<int>(kernel_send_timeout(cfg_.timeout).count());
            for (const auto& mad : actions.sends)
                port_.send(mad, info.sm_lid, info.sm_sl, is_response(mad) ? 0 : timeout_ms);
        }
    }
    for (const auto& event : actions.events) {
        async_event ev(event.type, port_.port(), event.gid);
        if (stream_)
            stream_->deliver(std::move(ev));
        else
            events_->inject(std::move(ev));
    }
    for (const auto& done : actions.completions) {
        unanswered_.erase(done.op);
        if (forgotten_.erase(done.op) == 0)
            results_->inject(sa_op_result{done.op, done.ec});
    }
    keep_reading_locked();
    schedule_timer_locked();
}

void subnet_client_impl::keep_reading_locked() {
    if (reading_ || closed_ || read_error_ || !fsm_.active())
        return;
    reading_ = true;
    mads_->async_next(match_any{}, pump_handler{weak_from_this()});
}

void subnet_client_impl::schedule_timer_locked() {
    ++timer_generation_;
    if (auto deadline = fsm_.next_deadline(); deadline && !closed_) {
        timer_.expires_at(*deadline);
        timer_.async_wait(timer_handler{weak_from_this(), timer_generation_});
    } else {
        timer_.cancel();
    }
}

void subnet_client_impl::on_mad(const error_code& ec, const received_mad& mad) {
    std::lock_guard lock(mutex_);
    reading_ = false;
    if (closed_)
        return;
    sa_subscriber::actions actions;
    if (ec && ec != asio::error::operation_aborted)
        read_error_ = ec; // later registrations fail with it; pending ones time out
    else if (!ec)
        fsm_.on_mad(mad.bytes(), clock::now(), actions);
    carry_out_locked(actions);
}

void subnet_client_impl::on_timer(std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    if (closed_ || generation != timer_generation_)
        return;
    sa_subscriber::actions actions;
    fsm_.on_timer(clock::now(), actions);
    carry_out_locked(actions);
}

} // namespace rdma_asio::detail
