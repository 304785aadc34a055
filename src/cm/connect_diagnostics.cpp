#include "rdma_asio/connect_diagnostics.hpp"

#include "rdma_asio/error.hpp"

namespace rdma_asio {

namespace {

// The errors a connect gives a step's failures (connect_step_error.hpp) name the
// step in their own message: a line need not say it twice.
bool names_its_step(const error_code& ec) noexcept {
    for (errc e : {errc::address_error, errc::address_timeout, errc::route_error,
                   errc::connect_timeout, errc::connection_rejected})
        if (ec == make_error_code(e))
            return true;
    return false;
}

} // namespace

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

std::string connect_diagnostics::message() const {
    std::string text;
    for (const failure& f : failures_) {
        if (!text.empty())
            text += '\n';
        if (f.step == connect_step::resolve_host) {
            text += "looking up the host ";
            text += host_;
            text += ", service ";
            text += service_;
        } else {
            text += f.endpoint.address().to_string();
            text += " port ";
            text += std::to_string(f.endpoint.port());
            if (!names_its_step(f.error)) {
                text += ": ";
                text += to_string(f.step);
            }
        }
        text += ": ";
        text += f.error.message();
    }
    return text;
}

void connect_diagnostics::clear() noexcept {
    failures_.clear();
    host_.clear();
    service_.clear();
}

void connect_diagnostics::add(connect_step step, const asio::ip::tcp::endpoint& endpoint,
                              const error_code& error) {
    failures_.push_back({endpoint, step, error});
}

void connect_diagnostics::looking_up(std::string_view host, std::string_view service) {
    host_ = host;
    service_ = service;
}

} // namespace rdma_asio
