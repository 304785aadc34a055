#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace rdma_asio::testing {
namespace {

void check_rc(int rc, const char* what) {
    if (rc != 0)
        throw system_error(detail::errno_code(rc > 0 ? rc : errno),
                           std::string("rdma_asio::testing: ") + what);
}

// An IPv4 address as a GID: ::ffff:a.b.c.d.
bool ipv4_mapped(const ibv_gid& gid) noexcept {
    static constexpr unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}

ibv_port_attr query_port(ibv_context* ctx, std::uint8_t port) {
    ibv_port_attr attr{};
    check_rc(ibv_query_port(ctx, port, &attr), "ibv_query_port");
    return attr;
}

void to_init(ibv_qp* qp, std::uint8_t port) {
    ibv_qp_attr init{};
    init.qp_state = IBV_QPS_INIT;
    init.port_num = port;
    init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    check_rc(ibv_modify_qp(qp, &init,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
             "ibv_modify_qp(INIT)");
}

void to_rtr(ibv_qp* qp, std::uint32_t remote_qpn, const ibv_port_attr& port_attr, std::uint8_t port,
            int gid_index, const ibv_gid& gid) {
    ibv_qp_attr rtr{};
    rtr.qp_state = IBV_QPS_RTR;
    rtr.path_mtu = port_attr.active_mtu;
    rtr.dest_qp_num = remote_qpn;
    rtr.max_dest_rd_atomic = 1;
    rtr.min_rnr_timer = 12;
    rtr.ah_attr.port_num = port;
    if (port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        // RoCE: addressed by GID, through a GRH.
        rtr.ah_attr.is_global = 1;
        rtr.ah_attr.grh.dgid = gid;
        rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
        rtr.ah_attr.grh.hop_limit = 1;
    } else {
        rtr.ah_attr.dlid = port_attr.lid;
    }
    check_rc(ibv_modify_qp(qp, &rtr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
             "ibv_modify_qp(RTR)");
}

void to_rts(ibv_qp* qp, std::uint8_t rnr_retry) {
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.timeout = 14;
    rts.retry_cnt = 7;
    rts.rnr_retry = rnr_retry;
    rts.max_rd_atomic = 1;
    check_rc(ibv_modify_qp(qp, &rts,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
             "ibv_modify_qp(RTS)");
}

} // namespace

int loopback_gid_index(ibv_context* ctx, std::uint8_t port) {
    const ibv_port_attr attr = query_port(ctx, port);
    int first_v2 = -1;
    for (int i = 0; i < attr.gid_tbl_len; ++i) {
        ibv_gid_entry entry{};
        // Unused entries fail (ENODATA): skipped.
        if (ibv_query_gid_ex(ctx, port, static_cast<std::uint32_t>(i), &entry, 0) != 0)
            continue;
        if (entry.gid_type != IBV_GID_TYPE_ROCE_V2)
            continue;
        ibv_gid gid{};
        std::memcpy(gid.raw, entry.gid.raw, sizeof gid.raw);
        if (ipv4_mapped(gid))
            return i;
        if (first_v2 < 0)
            first_v2 = i;
    }
    if (first_v2 >= 0)
        return first_v2;
    ibv_gid_entry entry{};
    if (int rc = ibv_query_gid_ex(ctx, port, 0, &entry, 0); rc != 0)
        throw system_error(detail::errno_code(rc > 0 ? rc : errno),
                           "rdma_asio::testing::loopback_gid_index: ibv_query_gid_ex");
    return 0;
}

void connect_to_local_qp(ibv_context* ctx, ibv_qp* qp, std::uint32_t remote_qp_num,
                         const loopback_options& options) {
    if (ctx == nullptr || qp == nullptr)
        throw system_error(asio::error::invalid_argument,
                           "rdma_asio::testing::connect_to_local_qp");
    if (options.rnr_retry > 7)
        throw system_error(asio::error::invalid_argument,
                           "rdma_asio::testing::connect_to_local_qp: loopback_options::rnr_retry "
                           "must be 0 to 7");
    const ibv_port_attr port_attr = query_port(ctx, options.port);
    int gid_index = 0;
    ibv_gid gid{};
    if (port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        gid_index =
            options.gid_index >= 0 ? options.gid_index : loopback_gid_index(ctx, options.port);
        check_rc(ibv_query_gid(ctx, options.port, gid_index, &gid), "ibv_query_gid");
    }
    to_init(qp, options.port);
    to_rtr(qp, remote_qp_num, port_attr, options.port, gid_index, gid);
    to_rts(qp, options.rnr_retry);
}

void connect_loopback(ibv_context* ctx, ibv_qp* a, ibv_qp* b, const loopback_options& options) {
    if (a == nullptr || b == nullptr)
        throw system_error(asio::error::invalid_argument, "rdma_asio::testing::connect_loopback");
    connect_to_local_qp(ctx, a, b->qp_num, options);
    connect_to_local_qp(ctx, b, a->qp_num, options);
}

} // namespace rdma_asio::testing
