#include "broker/server/caller.h"

#include <algorithm>

namespace paddock::server {

// Until principals and roles come from config, every caller on the broker's 0600 unix socket is
// the one local user, with every right.
Caller callerOf(const grpc::CallbackServerContext *context)
{
    Caller caller{"local", "admin", "unix", {}};
    const auto &md = context->client_metadata();
    if (auto it = md.find("paddock-user"); it != md.end())
        caller.claimed.assign(it->second.data(), std::min<size_t>(it->second.size(), 64));
    return caller;
}

} // namespace paddock::server
