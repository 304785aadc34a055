#include "fake_kernel.hpp"

#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace rdma_asio::test {
namespace {

// Reads one record like libibverbs' ibv_get_async_event, from a descriptor that
// behaves like the kernel's (EOF standing for the queue's -EIO).
int imitation_get_async_event(ibv_context* ctx, ibv_async_event* event) {
    ib_uverbs_async_event_desc desc{};
    ssize_t n = ::read(ctx->async_fd, &desc, sizeof desc);
    if (n == 0)
        errno = EIO;
    if (n != static_cast<ssize_t>(sizeof desc))
        return -1;
    event->event_type = static_cast<ibv_event_type>(desc.event_type);
    switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
        event->element.cq = reinterpret_cast<ibv_cq*>(static_cast<std::uintptr_t>(desc.element));
        break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        event->element.qp = reinterpret_cast<ibv_qp*>(static_cast<std::uintptr_t>(desc.element));
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        event->element.srq = reinterpret_cast<ibv_srq*>(static_cast<std::uintptr_t>(desc.element));
        break;
    case IBV_EVENT_WQ_FATAL:
        event->element.wq = reinterpret_cast<ibv_wq*>(static_cast<std::uintptr_t>(desc.element));
        break;
    default:
        event->element.port_num = static_cast<int>(desc.element);
    }
    return 0;
}

} // namespace

fake_async_fd::fake_async_fd() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe2 failed");
    ctx_.async_fd = fds[0];
    write_fd_ = fds[1];
    std::string pattern =
        (std::filesystem::temp_directory_path() / "rdma_asio-dev.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
        throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    std::ofstream(dir_ / "uverbs0");
}

fake_async_fd::~fake_async_fd() {
    ::close(ctx_.async_fd);
    if (write_fd_ >= 0)
        ::close(write_fd_);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

void fake_async_fd::raise(ibv_event_type type, std::uint64_t element) {
    ib_uverbs_async_event_desc desc{};
    desc.element = element;
    desc.event_type = type;
    if (::write(write_fd_, &desc, sizeof desc) != static_cast<ssize_t>(sizeof desc))
        throw std::runtime_error("fake_async_fd: write failed");
}

void fake_async_fd::disassociate() {
    ::close(write_fd_);
    write_fd_ = -1;
}

detail::async_event_source::options fake_async_fd::options() const {
    detail::async_event_source::options opts;
    opts.get_event = &imitation_get_async_event;
    opts.device_dir = dir_.string();
    opts.node_name = "uverbs0";
    opts.port_count = 0; // no verbs calls on the fake context
    return opts;
}

void fake_async_fd::remove_node() {
    std::filesystem::remove(dir_ / "uverbs0");
}

fake_cq::fake_cq() {
    pthread_mutex_init(&cq.mutex, nullptr);
    pthread_cond_init(&cq.cond, nullptr);
}
fake_cq::~fake_cq() {
    pthread_cond_destroy(&cq.cond);
    pthread_mutex_destroy(&cq.mutex);
}
fake_qp::fake_qp() {
    pthread_mutex_init(&qp.mutex, nullptr);
    pthread_cond_init(&qp.cond, nullptr);
}
fake_qp::~fake_qp() {
    pthread_cond_destroy(&qp.cond);
    pthread_mutex_destroy(&qp.mutex);
}

} // namespace rdma_asio::test
