#include "pingpong.hpp"

#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

namespace pingpong {
namespace {

enum : std::uint64_t { recv_wrid = 1, send_wrid = 2 };

ibv_mtu mtu_from(const char* text) {
    std::uint64_t bytes = 0;
    try {
        bytes = sample::parse_number(text, 256, 4096);
    } catch (const sample::bad_value&) {
        // Not a number from 256 to 4096: say which are allowed, as below.
    }
    switch (bytes) {
    case 256:
        return IBV_MTU_256;
    case 512:
        return IBV_MTU_512;
    case 1024:
        return IBV_MTU_1024;
    case 2048:
        return IBV_MTU_2048;
    case 4096:
        return IBV_MTU_4096;
    default:
        throw sample::bad_value("expected 256, 512, 1024, 2048 or 4096");
    }
}

[[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

} // namespace

options parse_options(int argc, char* argv[], const char* program, const char* summary) {
    options o;
    sample::command_line cli(program, summary, "[HOST]");
    cli.number('p', "port", "PORT", "listen on/connect to TCP port PORT (default 18515)", o.port,
               static_cast<unsigned short>(1));
    cli.option('d', "ib-dev", "DEV", "use IB device DEV (default: the first device found)",
               o.device);
    cli.number('i', "ib-port", "PORT", "use port PORT of the IB device (default 1)", o.ib_port, 1,
               255);
    cli.number('s', "size", "SIZE", "size of the message to exchange (default 4096)", o.size, 1u);
    cli.option('m', "mtu", "SIZE", "path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)",
               [&o](const char* v) { o.mtu = mtu_from(v); });
    // The CQ has rx_depth + 1 entries, an int.
    cli.number('r', "rx-depth", "DEPTH", "number of receives to post at a time (default 500)",
               o.rx_depth, 1u, 1u << 20);
    cli.number('n', "iters", "ITERS", "number of exchanges (default 1000)", o.iters, 1u);
    cli.number('l', "sl", "SL", "service level (default 0)", o.sl, 0, 15);
    cli.flag('e', "events", "sleep on CQ events (default: busy-poll the CQ)", o.events);
    cli.number('g', "gid-idx", "INDEX", "local port GID index (default: none, IB LIDs only)",
               o.gid_index, 0, 255);
    // A spin budget is how long a wait polls before it arms and sleeps, so it
    // belongs to -e: without -e the CQ is polled all the time anyway.
    bool spin_given = false;
    cli.option(0, "spin", "USEC", "with -e: poll this long before arming the CQ (rdma_asio only)",
               [&o, &spin_given](const char* v) {
                   o.spin_us = static_cast<unsigned>(sample::parse_number(v, 0, 1000000));
                   o.adaptive_spin = false;
                   spin_given = true;
               });
    cli.option(0, "adaptive-spin", "USEC",
               "with -e: spin for about twice the recent gap, at most USEC (rdma_asio only)",
               [&o, &spin_given](const char* v) {
                   o.spin_us = static_cast<unsigned>(sample::parse_number(v, 0, 1000000));
                   o.adaptive_spin = true;
                   spin_given = true;
               });
    const std::vector<std::string> operands = cli.parse(argc, argv, 0, 1);
    if (spin_given && !o.events)
        cli.usage_error("--spin and --adaptive-spin need -e (without -e the CQ is busy-polled "
                        "and never armed)");
    if (!operands.empty())
        o.server = operands[0];
    if (!sample::require_rdma(program))
        std::exit(1);
    return o;
}

// snippet-begin: pingpong-modes
rdma_asio::cq_options cq_options_for(const options& opts) {
    rdma_asio::cq_options o;
    if (!opts.events) {
        // Busy polling, as ibv_rc_pingpong without -e, but through async_poll: the
        // busy spin budget keeps every wait polling and never arms the CQ. The
        // loop stays the same code in both modes, the spinning wait still lets the
        // io_context run other handlers, and the CQ's counters and cancellation
        // keep working, which a loop over ibv_poll_cq on native_handle() would lose.
        o.spin = rdma_asio::spin_budget::busy();
    } else if (opts.spin_us > 0) {
        const std::chrono::microseconds limit(opts.spin_us);
        o.spin = opts.adaptive_spin ? rdma_asio::spin_budget::adaptive(limit)
                                    : rdma_asio::spin_budget::fixed(limit);
    }
    return o;
}
// snippet-end

std::string to_wire(const destination& d) {
    // The GID travels as its 16 bytes in hex, in memory order.
    char gid[33];
    for (int i = 0; i < 16; ++i)
        std::snprintf(gid + 2 * i, 3, "%02x", d.gid.raw[i]);
    char text[wire_size];
    std::snprintf(text, sizeof text, "%04x:%06x:%06x:%s", d.lid, d.qpn, d.psn, gid);
    return std::string(text, wire_size); // with the NUL, as the original writes it
}

std::optional<destination> from_wire(const char* text) {
    destination d;
    char gid[33] = {};
    if (std::sscanf(text, "%x:%x:%x:%32s", reinterpret_cast<unsigned*>(&d.lid),
                    reinterpret_cast<unsigned*>(&d.qpn), reinterpret_cast<unsigned*>(&d.psn),
                    gid) != 4 ||
        std::strlen(gid) != 32)
        return std::nullopt;
    for (int i = 0; i < 16; ++i) {
        unsigned byte = 0;
        if (std::sscanf(gid + 2 * i, "%2x", &byte) != 1)
            return std::nullopt;
        d.gid.raw[i] = static_cast<std::uint8_t>(byte);
    }
    return d;
}

destination remote_from_wire(const char* text) {
    auto remote = from_wire(text);
    if (!remote)
        throw std::runtime_error("Couldn't read remote address");
    return *remote;
}

asio::ip::tcp::acceptor listen_on(const asio::any_io_executor& ex, unsigned short port) {
    using asio::ip::tcp;
    tcp::acceptor acceptor(ex, tcp::v6());
    acceptor.set_option(asio::ip::v6_only(false));
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(tcp::endpoint(tcp::v6(), port));
    acceptor.listen(1);
    return acceptor;
}

asio::awaitable<destination> exchange(const options& o, const destination& local_address,
                                      const std::function<void(const destination&)>& connect) {
    using asio::ip::tcp;
    auto ex = co_await asio::this_coro::executor;
    const std::string local = to_wire(local_address);
    std::array<char, wire_size> msg{};
    tcp::socket socket(ex);
    if (o.server.empty()) {
        tcp::acceptor acceptor = listen_on(ex, o.port);
        socket = co_await acceptor.async_accept(asio::use_awaitable);
        co_await asio::async_read(socket, asio::buffer(msg), asio::use_awaitable);
        destination remote = remote_from_wire(msg.data());
        connect(remote);
        co_await asio::async_write(socket, asio::buffer(local), asio::use_awaitable);
        // "done", then the client closes.
        co_await socket.async_read_some(asio::buffer(msg),
                                        asio::experimental::as_tuple(asio::use_awaitable));
        co_return remote;
    }
    tcp::resolver resolver(ex);
    auto endpoints =
        co_await resolver.async_resolve(o.server, std::to_string(o.port), asio::use_awaitable);
    co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
    co_await asio::async_write(socket, asio::buffer(local), asio::use_awaitable);
    co_await asio::async_read(socket, asio::buffer(msg), asio::use_awaitable);
    co_await asio::async_write(socket, asio::buffer("done", sizeof "done"), asio::use_awaitable);
    destination remote = remote_from_wire(msg.data());
    connect(remote);
    co_return remote;
}

void print_address(const char* which, const destination& d) {
    char gid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, d.gid.raw, gid, sizeof gid);
    std::printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", which, d.lid, d.qpn, d.psn,
                gid);
}

endpoint::endpoint(rdma_asio::completion_channel& channel, const rdma_asio::context& ctx,
                   const options& opts)
    : opts_(opts), cq_(channel, static_cast<int>(opts.rx_depth) + 1, cq_options_for(opts)),
      buf_(opts.size, 0x7b) {
    ibv_context* c = ctx.native_handle();
    if ((pd_ = ibv_alloc_pd(c)) == nullptr)
        fail("ibv_alloc_pd");
    // An int: verbs.h's ibv_reg_mr macro ANDs it with a flag of another enum type.
    constexpr int access = IBV_ACCESS_LOCAL_WRITE;
    if ((mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), access)) == nullptr)
        fail("ibv_reg_mr");
    ibv_qp_init_attr init{};
    init.send_cq = cq_.native_handle();
    init.recv_cq = cq_.native_handle();
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = opts.rx_depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.qp_type = IBV_QPT_RC;
    if ((qp_ = ibv_create_qp(pd_, &init)) == nullptr)
        fail("ibv_create_qp");
    ibv_qp_attr attr{};
    ibv_qp_init_attr caps{};
    ibv_query_qp(qp_, &attr, IBV_QP_CAP, &caps);
    if (caps.cap.max_inline_data >= opts.size)
        send_flags_ |= IBV_SEND_INLINE;

    move_to_init(qp_, opts);
    routs_ = post_receives(static_cast<int>(opts.rx_depth));
    if (routs_ < static_cast<int>(opts.rx_depth))
        fail("ibv_post_recv");
    local_ = local_destination(ctx, qp_, opts);
}

endpoint::~endpoint() {
    // The QP goes before its CQ, the MR and PD after it.
    if (qp_)
        ibv_destroy_qp(qp_);
    if (mr_)
        ibv_dereg_mr(mr_);
    if (pd_)
        ibv_dealloc_pd(pd_);
}

void move_to_init(ibv_qp* qp, const options& opts) {
    ibv_qp_attr to_init{};
    to_init.qp_state = IBV_QPS_INIT;
    to_init.port_num = static_cast<std::uint8_t>(opts.ib_port);
    if (ibv_modify_qp(qp, &to_init,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        fail("ibv_modify_qp(INIT)");
}

destination local_destination(const rdma_asio::context& ctx, const ibv_qp* qp,
                              const options& opts) {
    destination local;
    ibv_port_attr port = ctx.query_port(static_cast<std::uint8_t>(opts.ib_port));
    local.lid = port.lid;
    if (port.link_layer != IBV_LINK_LAYER_ETHERNET && local.lid == 0)
        throw std::runtime_error("Couldn't get local LID");
    if (opts.gid_index >= 0)
        local.gid = ctx.query_gid(static_cast<std::uint8_t>(opts.ib_port), opts.gid_index);
    local.qpn = static_cast<int>(qp->qp_num);
    local.psn = static_cast<int>(std::random_device{}() & 0xffffff);
    return local;
}

void endpoint::connect(const destination& remote) {
    connect_qp(qp_, opts_, local_, remote);
}

void connect_qp(ibv_qp* qp, const options& opts, const destination& local,
                const destination& remote) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = opts.mtu;
    attr.dest_qp_num = static_cast<std::uint32_t>(remote.qpn);
    attr.rq_psn = static_cast<std::uint32_t>(remote.psn);
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.dlid = static_cast<std::uint16_t>(remote.lid);
    attr.ah_attr.sl = static_cast<std::uint8_t>(opts.sl);
    attr.ah_attr.port_num = static_cast<std::uint8_t>(opts.ib_port);
    if (remote.gid.global.interface_id != 0) {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.hop_limit = 1;
        attr.ah_attr.grh.dgid = remote.gid;
        attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(opts.gid_index);
    }
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        fail("Failed to modify QP to RTR");
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = static_cast<std::uint32_t>(local.psn);
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        fail("Failed to modify QP to RTS");
}

int endpoint::post_receives(int n) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf_.data()), opts_.size, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = recv_wrid;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    int i = 0;
    while (i < n && ibv_post_recv(qp_, &wr, &bad) == 0)
        ++i;
    return i;
}

void endpoint::post_send() {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf_.data()), opts_.size, mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = send_wrid;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = static_cast<unsigned>(send_flags_);
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp_, &wr, &bad) != 0)
        fail("Couldn't post send");
}

void endpoint::start(bool client) {
    pending_ = recv_wrid;
    if (client) {
        post_send();
        pending_ |= send_wrid;
    }
}

bool endpoint::handle(const ibv_wc* wcs, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
            std::fprintf(stderr, "Failed status %s (%d) for wr_id %d\n",
                         ibv_wc_status_str(wc.status), wc.status, static_cast<int>(wc.wr_id));
            return false;
        }
        if (wc.wr_id == send_wrid) {
            ++scnt_;
        } else if (wc.wr_id == recv_wrid) {
            if (--routs_ <= 1) {
                routs_ += post_receives(static_cast<int>(opts_.rx_depth) - routs_);
                if (routs_ < static_cast<int>(opts_.rx_depth)) {
                    std::fprintf(stderr, "Couldn't post receive (%d)\n", routs_);
                    return false;
                }
            }
            ++rcnt_;
        } else {
            std::fprintf(stderr, "Completion for unknown wr_id %d\n", static_cast<int>(wc.wr_id));
            return false;
        }
        pending_ &= ~static_cast<int>(wc.wr_id);
        if (scnt_ < opts_.iters && pending_ == 0) {
            post_send();
            pending_ = recv_wrid | send_wrid;
        }
    }
    return true;
}

void endpoint::print_statistics(std::chrono::steady_clock::duration elapsed) const {
    pingpong::print_statistics(opts_, elapsed, cq_);
}

void print_statistics(const options& opts, std::chrono::steady_clock::duration elapsed,
                      const rdma_asio::completion_queue& cq) {
    const double usec = std::chrono::duration<double, std::micro>(elapsed).count();
    const long long bytes = static_cast<long long>(opts.size) * opts.iters * 2;
    std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1000000.,
                bytes * 8. / usec);
    std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", opts.iters, usec / 1000000.,
                usec / opts.iters);
    // One line more than the original: how the waits went (busy polling never arms).
    const rdma_asio::cq_counters c = cq.counters();
    std::printf("rdma_asio CQ: %llu completions, %llu arms, %llu events, %llu spin hits\n",
                static_cast<unsigned long long>(c.completions),
                static_cast<unsigned long long>(c.arms), static_cast<unsigned long long>(c.events),
                static_cast<unsigned long long>(c.spin_hits));
}

} // namespace pingpong
