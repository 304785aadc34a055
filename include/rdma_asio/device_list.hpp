// The RDMA devices of this machine (ibv_get_device_list).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <cstddef>
#include <cstdint>
#include <string_view>

struct ibv_device;

namespace rdma_asio {

/// A device in a device_list: a view that is valid while the list lives.
class device {
public:
    explicit device(ibv_device* d) noexcept : dev_(d) {}

    /// Kernel name, e.g. "rxe0" or "mlx5_0".
    std::string_view name() const noexcept;
    /// Node GUID in host byte order.
    std::uint64_t guid() const noexcept;
    ibv_device* native_handle() const noexcept { return dev_; }

private:
    ibv_device* dev_;
};

/// An owning snapshot of ibv_get_device_list(), freed on destruction.
///
/// Enumeration fails with errc::no_kernel_support on a kernel without RDMA. An
/// empty list is not an error here: a machine may support RDMA and have no device;
/// context reports errc::no_device when asked to open one anyway.
class device_list {
public:
    class iterator;

    /// Enumerates the devices; throws system_error naming ibv_get_device_list.
    device_list();
    /// Enumerates the devices; on failure the list is empty and ec says why.
    explicit device_list(error_code& ec) noexcept;

    device_list(device_list&& other) noexcept;
    device_list& operator=(device_list&& other) noexcept;
    device_list(const device_list&) = delete;
    device_list& operator=(const device_list&) = delete;
    ~device_list();

    std::size_t size() const noexcept { return static_cast<std::size_t>(count_); }
    bool empty() const noexcept { return count_ == 0; }
    device operator[](std::size_t i) const noexcept { return device(list_[i]); }
    iterator begin() const noexcept;
    iterator end() const noexcept;

    /// The device called `name`, or nullptr.
    ibv_device* find(std::string_view name) const noexcept;

    ibv_device** native_handle() const noexcept { return list_; }

private:
    ibv_device** list_ = nullptr;
    int count_ = 0;
};

class device_list::iterator {
public:
    using value_type = device;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    explicit iterator(ibv_device* const* p) noexcept : p_(p) {}
    device operator*() const noexcept { return device(*p_); }
    iterator& operator++() noexcept {
        ++p_;
        return *this;
    }
    iterator operator++(int) noexcept {
        iterator old = *this;
        ++p_;
        return old;
    }
    bool operator==(const iterator&) const = default;

private:
    ibv_device* const* p_ = nullptr;
};

inline device_list::iterator device_list::begin() const noexcept {
    return iterator(list_);
}
inline device_list::iterator device_list::end() const noexcept {
    return iterator(list_ + count_);
}

} // namespace rdma_asio
