// The former header of sm_event_mask and subnet_event_client_counters.
#pragma once

#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"
