#include "broker/store/store_url.h"

#include "broker/store/pg_handle.h"

#include <libpq-fe.h>

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>

namespace paddock::store {

namespace {

struct OptionsDeleter {
    void operator()(PQconninfoOption *options) const { PQconninfoFree(options); }
};
using Options = std::unique_ptr<PQconninfoOption, OptionsDeleter>;

// libpq's parse of url: only the keys url sets have a value (no defaults are applied).
Result<Options> parse(const std::string &url)
{
    char *errmsg = nullptr;
    Options options(PQconninfoParse(url.c_str(), &errmsg));
    if (!options) {
        std::string reason = errmsg ? errmsg : "libpq is out of memory";
        PQfreemem(errmsg);
        while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' '))
            reason.pop_back();
        return fail(ErrorCode::InvalidArgument,
                    "the store url is not a PostgreSQL connection string (" + reason
                        + "); write postgresql://USER@HOST:PORT/DATABASE, or libpq's \"host=... dbname=... user=...\"");
    }
    return options;
}

const char *valueOf(const Options &options, std::string_view key)
{
    for (auto *option = options.get(); option->keyword; ++option) {
        if (key == option->keyword)
            return option->val;
    }
    return nullptr;
}

} // namespace

Status checkPostgresUrl(const std::string &url)
{
    auto options = parse(url);
    if (!options)
        return std::unexpected(options.error());
    if (const char *password = valueOf(*options, "password"); password && *password)
        return fail(ErrorCode::InvalidArgument,
                    "the store url carries a password, which must not be written in broker.toml or on a command line: "
                    "remove it from the url (" + describePostgresUrl(url)
                        + "), and set password_file = \"FILE\" (a file of mode 0600 holding the password) or "
                          "password_env = \"VARIABLE\" (an environment variable holding it) in [store]");
    return {};
}

std::string describePostgresUrl(const std::string &url)
{
    // pg::describeTarget leaves libpq's default user unnamed; the messages here name it.
    std::string out = pg::describeTarget(url);
    constexpr std::string_view kUnnamed = "(the OS user)";
    const std::string user = postgresUser(url);
    for (auto at = out.find(kUnnamed); at != std::string::npos; at = out.find(kUnnamed, at + user.size()))
        out.replace(at, kUnnamed.size(), user);
    return out;
}

std::string postgresUser(const std::string &url)
{
    if (auto options = parse(url)) {
        if (const char *user = valueOf(*options, "user"); user && *user)
            return user;
    }
    if (const char *user = std::getenv("PGUSER"); user && *user)
        return user;
    if (const passwd *entry = ::getpwuid(::geteuid()))
        return entry->pw_name;
    return "(the OS user)";
}

Result<std::string> postgresConninfo(const std::string &url, const std::string &password)
{
    auto options = parse(url);
    if (!options)
        return std::unexpected(options.error());
    std::string out;
    for (auto *option = options->get(); option->keyword; ++option) {
        if (!option->val || std::string_view(option->keyword) == "password")
            continue;
        if (!out.empty())
            out.push_back(' ');
        out += std::string(option->keyword) + "=" + conninfoQuoted(option->val);
    }
    if (!password.empty())
        out += (out.empty() ? "" : " ") + std::string("password=") + conninfoQuoted(password);
    return out;
}

std::string conninfoQuoted(const std::string &value)
{
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\')
            out.push_back('\\');
        out.push_back(c);
    }
    return out + "'";
}

} // namespace paddock::store
