// The status of a failed work completion as an error_code.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <infiniband/verbs.h>

#include <type_traits>

namespace rdma_asio {

/// Why a work request failed: the ibv_wc_status(3) of its completion, under the
/// same values (IBV_WC_SUCCESS has none: it is no error).
enum class wc_errc {
    local_length_error = IBV_WC_LOC_LEN_ERR,
    local_qp_operation_error = IBV_WC_LOC_QP_OP_ERR,
    local_eec_operation_error = IBV_WC_LOC_EEC_OP_ERR,
    local_protection_error = IBV_WC_LOC_PROT_ERR,
    /// The queue pair went to the error state before this work request ran: it
    /// was flushed, and the device no longer touches its buffer.
    flushed = IBV_WC_WR_FLUSH_ERR,
    memory_window_bind_error = IBV_WC_MW_BIND_ERR,
    bad_response = IBV_WC_BAD_RESP_ERR,
    local_access_error = IBV_WC_LOC_ACCESS_ERR,
    remote_invalid_request = IBV_WC_REM_INV_REQ_ERR,
    /// The peer refused the access: wrong rkey, a range outside its region, or an
    /// access its region was not registered for.
    remote_access_error = IBV_WC_REM_ACCESS_ERR,
    remote_operation_error = IBV_WC_REM_OP_ERR,
    /// The peer did not acknowledge within the QP's timeout and retry count.
    retry_exceeded = IBV_WC_RETRY_EXC_ERR,
    /// The peer had no receive posted within the QP's RNR retry count.
    rnr_retry_exceeded = IBV_WC_RNR_RETRY_EXC_ERR,
    local_rdd_violation = IBV_WC_LOC_RDD_VIOL_ERR,
    remote_invalid_rd_request = IBV_WC_REM_INV_RD_REQ_ERR,
    remote_aborted = IBV_WC_REM_ABORT_ERR,
    invalid_eecn = IBV_WC_INV_EECN_ERR,
    invalid_eec_state = IBV_WC_INV_EEC_STATE_ERR,
    fatal_error = IBV_WC_FATAL_ERR,
    response_timeout = IBV_WC_RESP_TIMEOUT_ERR,
    general_error = IBV_WC_GENERAL_ERR,
    tag_matching_error = IBV_WC_TM_ERR,
    tag_matching_rendezvous_incomplete = IBV_WC_TM_RNDV_INCOMPLETE,
};

/// The category of wc_errc; its name() is "rdma_asio.wc". Messages name the
/// status as ibv_wc_status_str(3) does, with its IBV_WC_ constant. Conditions:
/// `flushed` is std::errc::operation_canceled, `remote_access_error` and
/// `local_protection_error` std::errc::permission_denied, `retry_exceeded` and
/// `response_timeout` std::errc::timed_out, `rnr_retry_exceeded`
/// std::errc::connection_refused; every other status std::errc::io_error.
const error_category& get_wc_category() noexcept;

inline error_code make_error_code(wc_errc e) noexcept {
    return {static_cast<int>(e), get_wc_category()};
}

/// The error of a work completion: empty for IBV_WC_SUCCESS, otherwise its status
/// in wc_errc's category (statuses newer than this library included).
inline error_code wc_error(ibv_wc_status status) noexcept {
    if (status == IBV_WC_SUCCESS)
        return {};
    return {static_cast<int>(status), get_wc_category()};
}

} // namespace rdma_asio

RDMA_ASIO_DETAIL_ERROR_CODE_ENUM(rdma_asio::wc_errc);
