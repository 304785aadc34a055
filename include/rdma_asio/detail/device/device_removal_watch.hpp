// Notices that an RDMA device is going away: an inotify watch on the directory of
// its uverbs node (/dev/infiniband/uverbsN). Soft-RoCE, and any driver that raises
// no DEVICE_FATAL, shows removal only by deleting that node; the device's
// async_fd and completion channels stay silent until every context is closed.
#pragma once

#include <cstddef>
#include <string>

namespace rdma_asio::detail {

class device_removal_watch {
public:
    /// Watches nothing.
    device_removal_watch() noexcept = default;
    /// Best effort: when the watch cannot be set up, active() is false and removal
    /// is seen only through DEVICE_FATAL or a failing fd.
    device_removal_watch(const std::string& device_dir, std::string node_name) noexcept;
    device_removal_watch(device_removal_watch&& other) noexcept;
    device_removal_watch& operator=(device_removal_watch&& other) noexcept;
    device_removal_watch(const device_removal_watch&) = delete;
    device_removal_watch& operator=(const device_removal_watch&) = delete;
    ~device_removal_watch() { close(); }

    bool active() const noexcept { return fd_ >= 0; }
    /// The inotify fd, owned by this object (-1 when inactive).
    int fd() const noexcept { return fd_; }

    // A source of the event dispatcher watches its device with one of these as its
    // second fd, after its own (`own`): how many fds, which, and which to read as
    // soon as a wait starts. Not the watch: its one event is rare, and the reactor
    // reports it also when it came before the wait.
    std::size_t fd_count() const noexcept { return active() ? 2 : 1; }
    int fd_after(int own, std::size_t i) const noexcept { return i == 0 ? own : fd_; }
    static bool drain_on_arm(std::size_t i) noexcept { return i == 0; }

    /// Reads every queued notification (until EAGAIN); true when one of them is
    /// the deletion of the node.
    bool node_deleted() noexcept;
    void close() noexcept;

private:
    int fd_ = -1;
    std::string node_name_;
};

} // namespace rdma_asio::detail
