#include "verbs_resources.hpp"

#include "rdma_asio/testing/loopback.hpp"

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace rdma_asio::test {
namespace {

template <class T>
T* check(T* p, const char* what) {
    if (p == nullptr)
        throw std::runtime_error(std::string(what) + " failed");
    return p;
}

void check_rc(int rc, const char* what) {
    if (rc != 0)
        throw std::runtime_error(std::string(what) + " failed: " + std::to_string(rc));
}

} // namespace

pd_ptr make_pd(ibv_context* ctx) {
    return pd_ptr(check(ibv_alloc_pd(ctx), "ibv_alloc_pd"));
}

cq_ptr make_cq(ibv_context* ctx, int entries, ibv_comp_channel* channel) {
    return cq_ptr(check(ibv_create_cq(ctx, entries, nullptr, channel, 0), "ibv_create_cq"));
}

srq_ptr make_srq(ibv_pd* pd, std::uint32_t max_wr) {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = max_wr;
    attr.attr.max_sge = 1;
    return srq_ptr(check(ibv_create_srq(pd, &attr), "ibv_create_srq"));
}

qp_ptr make_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
                  std::uint32_t max_send_wr) {
    ibv_qp_init_attr attr{};
    attr.send_cq = send_cq;
    attr.recv_cq = recv_cq;
    attr.srq = srq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = max_send_wr;
    attr.cap.max_recv_wr = srq ? 0 : max_send_wr;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    return qp_ptr(check(ibv_create_qp(pd, &attr), "ibv_create_qp"));
}

qp_ptr make_ud_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_wr) {
    ibv_qp_init_attr attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_UD;
    attr.cap.max_send_wr = max_wr;
    attr.cap.max_recv_wr = max_wr;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    return qp_ptr(check(ibv_create_qp(pd, &attr), "ibv_create_qp"));
}

void connect_rc(ibv_context* ctx, ibv_qp* qp, std::uint32_t remote_qpn) {
    // The installed helper, so that it is what the project's own tests run.
    rdma_asio::testing::connect_to_local_qp(ctx, qp, remote_qpn);
}

void connect_rc_pair(ibv_context* ctx, ibv_qp* a, ibv_qp* b) {
    connect_rc(ctx, a, b->qp_num);
    connect_rc(ctx, b, a->qp_num);
}

registered_buffer::registered_buffer(ibv_pd* pd, std::size_t size)
    : bytes(size), mr(check(ibv_reg_mr(pd, bytes.data(), size,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                           IBV_ACCESS_REMOTE_READ),
                            "ibv_reg_mr")) {}

namespace {
ibv_sge sge_of(const registered_buffer& buf) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.bytes.data());
    sge.length = static_cast<std::uint32_t>(buf.bytes.size());
    sge.lkey = buf.mr->lkey;
    return sge;
}
} // namespace

namespace {
// One receive of the whole buffer; `sge` must outlive the post.
ibv_recv_wr recv_wr_of(ibv_sge& sge, std::uint64_t wr_id) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return wr;
}
} // namespace

void post_recv(ibv_qp* qp, const registered_buffer& buf, std::uint64_t wr_id) {
    ibv_sge sge = sge_of(buf);
    ibv_recv_wr wr = recv_wr_of(sge, wr_id);
    ibv_recv_wr* bad = nullptr;
    check_rc(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
}

void post_srq_recv(ibv_srq* srq, const registered_buffer& buf, std::uint64_t wr_id) {
    ibv_sge sge = sge_of(buf);
    ibv_recv_wr wr = recv_wr_of(sge, wr_id);
    ibv_recv_wr* bad = nullptr;
    check_rc(ibv_post_srq_recv(srq, &wr, &bad), "ibv_post_srq_recv");
}

void post_send(ibv_qp* qp, const registered_buffer& buf, std::uint64_t wr_id, bool signaled) {
    ibv_sge sge = sge_of(buf);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    ibv_send_wr* bad = nullptr;
    check_rc(ibv_post_send(qp, &wr, &bad), "ibv_post_send");
}

void post_rdma_write(ibv_qp* qp, const registered_buffer& local, const registered_buffer& remote,
                     std::uint64_t wr_id) {
    ibv_sge sge = sge_of(local);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.bytes.data());
    wr.wr.rdma.rkey = remote.mr->rkey;
    ibv_send_wr* bad = nullptr;
    check_rc(ibv_post_send(qp, &wr, &bad), "ibv_post_send(RDMA_WRITE)");
}

void run_command(const std::string& command) {
    if (std::system(command.c_str()) != 0)
        throw std::runtime_error("command failed: " + command);
}

bool wait_port_state(ibv_context* ctx, ibv_port_state state, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    do {
        ibv_port_attr attr{};
        if (ibv_query_port(ctx, 1, &attr) == 0 && attr.state == state)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
}

} // namespace rdma_asio::test
