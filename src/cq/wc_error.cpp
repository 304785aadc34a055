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

// What the status most often means for a program, and what to do: the device
// names a status, not its cause, and one status has several (rxe reports a
// receive buffer shorter than the message as IBV_WC_LOC_QP_OP_ERR, hardware as
// IBV_WC_LOC_LEN_ERR). Null for the rare statuses, which keep libibverbs' words.
const char* likely_cause(int value) noexcept {
    switch (value) {
    case IBV_WC_LOC_LEN_ERR:
        return "the message was longer than the receive buffer, or a datagram longer than the "
               "path MTU";
    case IBV_WC_LOC_QP_OP_ERR:
        return "a buffer the device could not use: on a receive, most often a message longer "
               "than the buffer; otherwise a buffer outside the memory regions of the queue "
               "pair's protection domain, or one the device writes to in a region without "
               "IBV_ACCESS_LOCAL_WRITE (soft-RoCE reports these so)";
    case IBV_WC_LOC_PROT_ERR:
        return "a local buffer lies outside the memory regions of the queue pair's protection "
               "domain, or its region lacks IBV_ACCESS_LOCAL_WRITE (needed by a receive and by "
               "the target of an RDMA read or atomic)";
    case IBV_WC_WR_FLUSH_ERR:
        return "the queue pair had gone to the error state before this work request ran: an "
               "earlier one failed, or the queue pair was disconnected or closed";
    case IBV_WC_LOC_ACCESS_ERR:
        return "a local buffer's region does not allow the access";
    case IBV_WC_REM_INV_REQ_ERR:
        return "the peer refused the request: a message longer than its receive buffer, an "
               "operation its queue pair does not allow, or an atomic at a misaligned address";
    case IBV_WC_REM_ACCESS_ERR:
        return "the peer's memory region does not allow this access: an RDMA write needs "
               "IBV_ACCESS_REMOTE_WRITE, a read IBV_ACCESS_REMOTE_READ, an atomic "
               "IBV_ACCESS_REMOTE_ATOMIC, and the rkey and the whole range must be the region's";
    case IBV_WC_REM_OP_ERR:
        return "the peer could not take the message: most often its receive buffer was shorter "
               "than the message, or its region lacks IBV_ACCESS_LOCAL_WRITE";
    case IBV_WC_RETRY_EXC_ERR:
        return "the peer did not acknowledge in time: it is gone, unreachable, or its queue "
               "pair is not connected to this one";
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return "the peer had no receive posted for the message within the RNR retries "
               "(rnr_retry): post receives before the peer sends";
    case IBV_WC_RESP_TIMEOUT_ERR:
        return "the peer did not answer an RDMA read or atomic in time";
    case IBV_WC_BAD_RESP_ERR:
        return "the peer answered with a response that does not fit the request";
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
        // libibverbs' own words for the status, then the constant, then the cause.
        std::string text = std::string(ibv_wc_status_str(static_cast<ibv_wc_status>(value))) +
                           " (" + constant + ")";
        if (const char* cause = likely_cause(value))
            text.append(": ").append(cause);
        return text;
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
