#include "rdma_asio/connect_diagnostics.hpp"

#include "rdma_asio/detail/cm/connect_step_error.hpp"
#include "rdma_asio/error.hpp"

namespace rdma_asio {

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
            if (!detail::names_its_step(f.error)) {
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
