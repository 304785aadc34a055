#include "rdma_asio/detail/device/device_removal_watch.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace rdma_asio::detail {

device_removal_watch::device_removal_watch(const std::string& device_dir,
                                           std::string node_name) noexcept {
    if (node_name.empty())
        return;
    try {
        node_name_ = std::move(node_name);
    } catch (...) {
        return;
    }
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0 && ::inotify_add_watch(fd_, device_dir.c_str(), IN_DELETE) < 0)
        close();
}

device_removal_watch::device_removal_watch(device_removal_watch&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), node_name_(std::move(other.node_name_)) {}

device_removal_watch& device_removal_watch::operator=(device_removal_watch&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        node_name_ = std::move(other.node_name_);
    }
    return *this;
}

void device_removal_watch::close() noexcept {
    if (fd_ >= 0)
        ::close(std::exchange(fd_, -1));
}

bool device_removal_watch::node_deleted() noexcept {
    bool gone = false;
    alignas(inotify_event) char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd_, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return gone;
        for (char* p = buffer; p < buffer + n;) {
            auto* record = reinterpret_cast<inotify_event*>(p);
            if ((record->mask & IN_DELETE) != 0 && record->len > 0 && node_name_ == record->name)
                gone = true;
            p += sizeof(inotify_event) + record->len;
        }
    }
}

} // namespace rdma_asio::detail
