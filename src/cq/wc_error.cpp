#include "rdma_asio/wc_error.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <string>

namespace rdma_asio {
namespace {

// The IBV_WC_ constant of each status, for messages a user can search for.
const char* constant_name(int value) noexcept {
    switch (value) {
    case IBV_WC_LOC_LEN_ERR:
        return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR:
        return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR:
        return "IBV_WC_LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR:
        return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR:
        return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR:
        return "IBV_WC_MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR:
        return "IBV_WC_BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR:
        return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR:
        return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR:
        return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR:
        return "IBV_WC_REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR:
        return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR:
        return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR:
        return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR:
        return "IBV_WC_REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR:
        return "IBV_WC_INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR:
        return "IBV_WC_INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR:
        return "IBV_WC_FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR:
        return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR:
        return "IBV_WC_GENERAL_ERR";
    case IBV_WC_TM_ERR:
        return "IBV_WC_TM_ERR";
    case IBV_WC_TM_RNDV_INCOMPLETE:
        return "IBV_WC_TM_RNDV_INCOMPLETE";
    }
    return nullptr;
}

class wc_category_impl final : public error_category {
public:
    const char* name() const noexcept override { return "rdma_asio.wc"; }

    std::string message(int value) const override {
        const char* constant = constant_name(value);
        if (constant == nullptr)
            return "work completion status " + std::to_string(value);
        // libibverbs' own words for the status, then the constant.
        return std::string(ibv_wc_status_str(static_cast<ibv_wc_status>(value))) + " (" + constant +
               ")";
    }

    error_condition default_error_condition(int value) const noexcept override {
        switch (value) {
        case IBV_WC_WR_FLUSH_ERR:
            return detail::generic_errc::operation_canceled;
        case IBV_WC_REM_ACCESS_ERR:
        case IBV_WC_LOC_PROT_ERR:
            return detail::generic_errc::permission_denied;
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RESP_TIMEOUT_ERR:
            return detail::generic_errc::timed_out;
        case IBV_WC_RNR_RETRY_EXC_ERR:
            return detail::generic_errc::connection_refused;
        }
        return detail::generic_errc::io_error;
    }
};

} // namespace

const error_category& get_wc_category() noexcept {
    static const wc_category_impl category;
    return category;
}

} // namespace rdma_asio
