#include "rdma_asio/testing/netdev.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/testing/loopback.hpp"

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace rdma_asio::testing {
namespace {

[[noreturn]] void fail(int e, const std::string& what) {
    throw system_error(detail::errno_code(e), "rdma_asio::testing::" + what);
}

// A socket closed on every path.
class socket_fd {
public:
    socket_fd(int domain, int type, int protocol, const char* what)
        : fd_(::socket(domain, type | SOCK_CLOEXEC, protocol)) {
        if (fd_ < 0)
            fail(errno, what);
    }
    ~socket_fd() { ::close(fd_); }
    socket_fd(const socket_fd&) = delete;
    socket_fd& operator=(const socket_fd&) = delete;
    int get() const noexcept { return fd_; }

private:
    int fd_;
};

ifreq request_for(std::string_view name, const char* what) {
    ifreq req{};
    if (name.empty() || name.size() >= sizeof req.ifr_name)
        fail(EINVAL, std::string(what) + ": bad device name");
    std::memcpy(req.ifr_name, name.data(), name.size());
    return req;
}

short link_flags(int fd, ifreq& req, std::string_view name) {
    if (::ioctl(fd, SIOCGIFFLAGS, &req) != 0)
        fail(errno, "link flags of " + std::string(name) + ": SIOCGIFFLAGS");
    return req.ifr_flags;
}

// An address and prefix length, "10.0.0.9/24" or "fd00::9/64".
struct parsed_address {
    int family = AF_UNSPEC;
    unsigned char bytes[16] = {};
    std::size_t size = 0;
    unsigned prefix = 0;
};

parsed_address parse(std::string_view text) {
    parsed_address a;
    const auto slash = text.find('/');
    const std::string host(text.substr(0, slash));
    if (::inet_pton(AF_INET, host.c_str(), a.bytes) == 1) {
        a.family = AF_INET;
        a.size = 4;
    } else if (::inet_pton(AF_INET6, host.c_str(), a.bytes) == 1) {
        a.family = AF_INET6;
        a.size = 16;
    } else {
        fail(EINVAL, "scoped_address: not an address: " + std::string(text));
    }
    a.prefix = static_cast<unsigned>(a.size * 8);
    if (slash != std::string_view::npos) {
        const std::string len(text.substr(slash + 1));
        char* end = nullptr;
        const unsigned long n = std::strtoul(len.c_str(), &end, 10);
        if (len.empty() || *end != '\0' || n > a.prefix)
            fail(EINVAL, "scoped_address: bad prefix length: " + std::string(text));
        a.prefix = static_cast<unsigned>(n);
    }
    return a;
}

// Sends one RTM_NEWADDR or RTM_DELADDR and reads the kernel's acknowledgement.
void change_address(int type, std::string_view netdev, std::string_view text) {
    const char* step =
        type == RTM_NEWADDR ? "scoped_address: RTM_NEWADDR" : "scoped_address: RTM_DELADDR";
    const parsed_address a = parse(text);
    const unsigned index = ::if_nametoindex(std::string(netdev).c_str());
    if (index == 0)
        fail(errno, std::string(step) + ": no device " + std::string(netdev));

    struct {
        nlmsghdr header;
        ifaddrmsg body;
        char attributes[64];
    } msg{};
    msg.header.nlmsg_len = NLMSG_LENGTH(sizeof msg.body);
    msg.header.nlmsg_type = static_cast<unsigned short>(type);
    msg.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    if (type == RTM_NEWADDR)
        msg.header.nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
    msg.header.nlmsg_seq = 1;
    msg.body.ifa_family = static_cast<unsigned char>(a.family);
    msg.body.ifa_prefixlen = static_cast<unsigned char>(a.prefix);
    msg.body.ifa_index = index;
    // IFA_LOCAL and IFA_ADDRESS both, as `ip addr add` sends them.
    for (unsigned short kind :
         {static_cast<unsigned short>(IFA_LOCAL), static_cast<unsigned short>(IFA_ADDRESS)}) {
        auto* attr = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&msg) +
                                               NLMSG_ALIGN(msg.header.nlmsg_len));
        attr->rta_type = kind;
        attr->rta_len = static_cast<unsigned short>(RTA_LENGTH(a.size));
        std::memcpy(RTA_DATA(attr), a.bytes, a.size);
        msg.header.nlmsg_len = NLMSG_ALIGN(msg.header.nlmsg_len) + RTA_ALIGN(attr->rta_len);
    }

    socket_fd fd(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, step);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd.get(), &msg, msg.header.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) < 0)
        fail(errno, step);
    // The acknowledgement: an NLMSG_ERROR whose error is 0 on success.
    timeval limit{5, 0}; // bounded: the kernel answers at once
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char reply[512];
    const ssize_t n = ::recv(fd.get(), reply, sizeof reply, 0);
    if (n < 0)
        fail(errno, std::string(step) + ": no acknowledgement");
    const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
    if (!NLMSG_OK(header, static_cast<unsigned>(n)) || header->nlmsg_type != NLMSG_ERROR)
        fail(EPROTO, std::string(step) + ": unexpected reply");
    const auto* error = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
    if (error->error != 0)
        fail(-error->error,
             std::string(step) + " " + std::string(text) + " on " + std::string(netdev));
}

} // namespace

std::string netdev_of(ibv_context* ctx, std::uint8_t port, int gid_index) {
    if (ctx == nullptr)
        throw system_error(asio::error::invalid_argument, "rdma_asio::testing::netdev_of");
    const int index = gid_index >= 0 ? gid_index : loopback_gid_index(ctx, port);
    ibv_gid_entry entry{};
    if (int rc = ibv_query_gid_ex(ctx, port, static_cast<std::uint32_t>(index), &entry, 0); rc != 0)
        fail(rc > 0 ? rc : errno, "netdev_of: ibv_query_gid_ex");
    char name[IF_NAMESIZE] = {};
    if (entry.ndev_ifindex == 0 || ::if_indextoname(entry.ndev_ifindex, name) == nullptr)
        fail(ENODEV, "netdev_of: the GID has no network device");
    return name;
}

bool link_is_up(std::string_view name) {
    socket_fd fd(AF_INET, SOCK_DGRAM, 0, "link_is_up: socket");
    ifreq req = request_for(name, "link_is_up");
    return (link_flags(fd.get(), req, name) & IFF_UP) != 0;
}

void set_link(std::string_view name, bool up) {
    socket_fd fd(AF_INET, SOCK_DGRAM, 0, "set_link: socket");
    ifreq req = request_for(name, "set_link");
    const short flags = link_flags(fd.get(), req, name);
    req.ifr_flags = static_cast<short>(up ? (flags | IFF_UP) : (flags & ~IFF_UP));
    if (::ioctl(fd.get(), SIOCSIFFLAGS, &req) != 0)
        fail(errno, "set_link " + std::string(name) + (up ? " up" : " down") + ": SIOCSIFFLAGS");
}

scoped_address::scoped_address(std::string_view netdev, std::string_view address)
    : netdev_(netdev), address_(address) {
    change_address(RTM_NEWADDR, netdev_, address_);
    added_ = true;
}

scoped_address::~scoped_address() {
    try {
        remove();
    } catch (...) {
        // Gone already (the device went away, or someone removed it): nothing to undo.
    }
}

void scoped_address::remove() {
    if (!added_)
        return;
    added_ = false;
    change_address(RTM_DELADDR, netdev_, address_);
}

} // namespace rdma_asio::testing
