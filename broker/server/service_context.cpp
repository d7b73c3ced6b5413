#include "broker/server/service_context.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

namespace paddock::server {

namespace {

std::shared_ptr<const auth::PrincipalMap> principalsOr(std::shared_ptr<const auth::PrincipalMap> principals)
{
    if (principals)
        return principals;
    return std::make_shared<const auth::PrincipalMap>(auth::PrincipalMap::embeddedDefault(::getuid()));
}

} // namespace

std::string joined(const std::vector<std::string> &names)
{
    std::string out;
    for (const auto &name : names)
        out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "(none)" : out;
}

ServiceContext::ServiceContext(store::EventStore &store_, StreamHub &hub_, const placement::PoolSet &pools_,
                               engine::ModelLookup models_, ServiceOptions options_)
    : store(store_), hub(hub_), pools(pools_), models(std::move(models_)), options(std::move(options_)),
      access(store_, principalsOr(options.principals))
{
    if (auto loaded = access.loadTokens(); !loaded)
        spdlog::error("tokens: {}; no token will be accepted", loaded.error().message);
}

Result<core::SessionState> ServiceContext::getSession(const std::string &id) const
{
    if (id.empty())
        return fail(ErrorCode::InvalidArgument, "no session id given: pass the id that `paddockctl ls` shows");
    auto state = store.getSession(id);
    if (!state && state.error().code == ErrorCode::NotFound)
        return fail(ErrorCode::NotFound, "no session '" + id + "' on this broker: list sessions with `paddockctl ls`");
    return state;
}

std::string ServiceContext::redactedJson(const nlohmann::json &payload) const
{
    std::string text = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (options.secrets)
        options.secrets->snapshot()->redactor.redactJsonText(text);
    return text;
}

} // namespace paddock::server
