#include "rdma_asio/connect_step.hpp"

namespace rdma_asio {

std::string_view to_string(connect_step step) noexcept {
    switch (step) {
    case connect_step::resolve_host:
        return "looking up the host";
    case connect_step::resolve_address:
        return "resolving the address";
    case connect_step::resolve_route:
        return "resolving the route";
    case connect_step::make_connection:
        return "making the connection";
    case connect_step::connect:
        return "connecting";
    }
    return "an unknown step";
}

} // namespace rdma_asio
