#include "rdma_asio/device_list.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <utility>

namespace rdma_asio {

std::string_view device::name() const noexcept {
    return ibv_get_device_name(dev_);
}

std::uint64_t device::guid() const noexcept {
    return be64toh(ibv_get_device_guid(dev_));
}

device_list::device_list() {
    error_code ec;
    *this = device_list(ec);
    detail::throw_if_error(ec, "ibv_get_device_list");
}

device_list::device_list(error_code& ec) noexcept {
    errno = 0;
    int n = 0;
    list_ = ibv_get_device_list(&n);
    if (list_ == nullptr) {
        // libibverbs answers ENOSYS when sysfs has no uverbs ABI: no kernel support.
        ec = errno == ENOSYS ? error_code(errc::no_kernel_support) : detail::last_errno_code();
        return;
    }
    count_ = n;
    ec.clear();
}

device_list::device_list(device_list&& other) noexcept
    : list_(std::exchange(other.list_, nullptr)), count_(std::exchange(other.count_, 0)) {}

device_list& device_list::operator=(device_list&& other) noexcept {
    if (this != &other) {
        if (list_ != nullptr)
            ibv_free_device_list(list_);
        list_ = std::exchange(other.list_, nullptr);
        count_ = std::exchange(other.count_, 0);
    }
    return *this;
}

device_list::~device_list() {
    // ibv_free_device_list(NULL) crashes.
    if (list_ != nullptr)
        ibv_free_device_list(list_);
}

ibv_device* device_list::find(std::string_view name) const noexcept {
    for (device d : *this)
        if (d.name() == name)
            return d.native_handle();
    return nullptr;
}

} // namespace rdma_asio
