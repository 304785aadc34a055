// What the two rc_pingpong samples share: the options and TCP exchange of
// rdma-core's ibv_rc_pingpong (so they interoperate with it), the verbs setup, the
// ping-pong bookkeeping, and how the CQ waits (busy polling, or events with -e).
// The samples differ only in how they are written: one with coroutines, one with
// callbacks.
#pragma once

#include <rdma_asio/completion_queue.hpp>
#include <rdma_asio/context.hpp>

#include "asio_alias.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pingpong {

struct options {
    std::string server; // empty: be the server
    unsigned short port = 18515;
    std::string device; // empty: the first device
    int ib_port = 1;
    unsigned size = 4096;
    ibv_mtu mtu = IBV_MTU_1024;
    unsigned rx_depth = 500;
    unsigned iters = 1000;
    int sl = 0;
    int gid_index = -1;
    bool events = false;  // -e: sleep on CQ events; without it, busy-poll
    unsigned spin_us = 0; // rdma_asio only, with -e: spin budget before arming
    bool adaptive_spin = false;
};

/// Parses ibv_rc_pingpong's options (-p -d -i -s -m -r -n -l -e -g) and operand
/// (HOST: be the client) plus --spin=USEC and --adaptive-spin=USEC, with -h/--help.
/// A bad value, a second operand, or a spin budget without -e: the problem and
/// the usage on stderr, exit 2. No RDMA on this machine: sample::require_rdma's
/// message, exit 1.
options parse_options(int argc, char* argv[], const char* program, const char* summary);

/// The CQ's options for the waiting mode the command line asks for: without -e a
/// spin budget that never runs out (async_poll polls and never arms: busy
/// polling), with -e no budget or the --spin/--adaptive-spin one.
rdma_asio::cq_options cq_options_for(const options& opts);

/// One side's address as ibv_rc_pingpong writes it: "LID:QPN:PSN:GID", 52 bytes
/// with the terminating NUL.
struct destination {
    int lid = 0;
    int qpn = 0;
    int psn = 0;
    ibv_gid gid{};
};
constexpr std::size_t wire_size = sizeof "0000:000000:000000:00000000000000000000000000000000";
std::string to_wire(const destination& d);
std::optional<destination> from_wire(const char* text);
/// from_wire, throwing when the peer sent no address.
destination remote_from_wire(const char* text);
/// The server's listening socket, on every address (IPv6 and IPv4) like the
/// original's AI_PASSIVE lookup.
asio::ip::tcp::acceptor listen_on(const asio::any_io_executor& ex, unsigned short port);
/// The address exchange of ibv_rc_pingpong over TCP: the client sends its
/// address, the server calls `connect` with it (its QP must be ready before the
/// client's first message) and answers with its own, the client calls `connect`
/// and says "done". Returns the peer's address.
asio::awaitable<destination> exchange(const options& o, const destination& local,
                                      const std::function<void(const destination&)>& connect);
/// Prints an address as ibv_rc_pingpong does; `which` is "local address: " or
/// "remote address:".
void print_address(const char* which, const destination& d);

/// The verbs steps of ibv_rc_pingpong on a QP of the caller's: to INIT (before
/// its receives are posted), its own address (LID, QPN, a random PSN, the GID of
/// -g), and RTR then RTS towards `remote`.
void move_to_init(ibv_qp* qp, const options& opts);
destination local_destination(const rdma_asio::context& ctx, const ibv_qp* qp, const options& opts);
void connect_qp(ibv_qp* qp, const options& opts, const destination& local,
                const destination& remote);
/// ibv_rc_pingpong's statistics lines, then the CQ's counters ("rdma_asio CQ: N
/// completions, N arms, N events, N spin hits").
void print_statistics(const options& opts, std::chrono::steady_clock::duration elapsed,
                      const rdma_asio::completion_queue& cq);

/// The verbs objects of one side: one CQ for sends and receives, as the original.
class endpoint {
public:
    endpoint(rdma_asio::completion_channel& channel, const rdma_asio::context& ctx,
             const options& opts);
    ~endpoint();
    endpoint(const endpoint&) = delete;
    endpoint& operator=(const endpoint&) = delete;

    destination local() const { return local_; }
    /// RTR then RTS towards `remote`.
    void connect(const destination& remote);
    rdma_asio::completion_queue& cq() { return cq_; }

    /// Starts the exchange; the client sends first.
    void start(bool client);
    /// Handles completions; false on a failed one (message printed).
    bool handle(const ibv_wc* wcs, std::size_t n);
    bool done() const { return rcnt_ >= opts_.iters && scnt_ >= opts_.iters; }
    /// Prints ibv_rc_pingpong's statistics lines, then the CQ's counters
    /// ("rdma_asio CQ: N completions, N arms, N events, N spin hits").
    void print_statistics(std::chrono::steady_clock::duration elapsed) const;

private:
    int post_receives(int n);
    void post_send();

    options opts_;
    rdma_asio::completion_queue cq_;
    std::vector<char> buf_;
    ibv_pd* pd_ = nullptr;
    ibv_mr* mr_ = nullptr;
    ibv_qp* qp_ = nullptr;
    destination local_;
    int send_flags_ = IBV_SEND_SIGNALED;
    int routs_ = 0;
    unsigned rcnt_ = 0, scnt_ = 0;
    int pending_ = 0;
};

} // namespace pingpong
