#include "broker/config/store_config.h"

#include "broker/store/store_url.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace paddock::broker_config {

namespace {

constexpr std::uintmax_t kMaxPasswordFileBytes = 4096;

std::string where(const std::filesystem::path &file, const toml::node &node)
{
    return file.string() + ":" + std::to_string(node.source().begin.line);
}

std::string octalMode(mode_t mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

Result<std::string> readPasswordFile(const std::filesystem::path &file)
{
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) {
        const int error = errno;
        return fail(ErrorCode::FailedPrecondition,
                    "cannot read the store's password_file " + file.string() + " (" + std::strerror(error)
                        + "): create it holding the database user's password on one line, mode 0600, or fix "
                          "password_file in [store]");
    }
    if (!S_ISREG(info.st_mode))
        return fail(ErrorCode::FailedPrecondition,
                    "the store's password_file " + file.string() + " is not a regular file: name the file itself");
    if ((info.st_mode & 077) != 0)
        return fail(ErrorCode::FailedPrecondition,
                    "the store's password_file " + file.string() + " has mode " + octalMode(info.st_mode)
                        + ", which lets group or others read or change the password; run `chmod 600 " + file.string()
                        + "`");
    if (static_cast<std::uintmax_t>(info.st_size) > kMaxPasswordFileBytes)
        return fail(ErrorCode::FailedPrecondition,
                    "the store's password_file " + file.string()
                        + " is larger than 4 KiB: it must hold the password alone, on one line");
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    if (in.is_open())
        text << in.rdbuf();
    if (!in.is_open() || in.bad())
        return fail(ErrorCode::FailedPrecondition, "cannot read the store's password_file " + file.string()
                                                       + ": check that paddockd's user may read it");
    std::string password = text.str();
    if (const auto end = password.find_first_of("\r\n"); end != std::string::npos)
        password.resize(end);
    if (password.empty())
        return fail(ErrorCode::FailedPrecondition, "the store's password_file " + file.string()
                                                       + " is empty: write the database user's password in it");
    return password;
}

} // namespace

const ConfigSection &storeSection()
{
    static const ConfigSection section{"broker.toml", "[store]", {"url", "password_file", "password_env", "connect_wait_ms"}};
    return section;
}

StoreConfig parseStoreConfig(const std::filesystem::path &file, const toml::table &table, StoreConfig config,
                             ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };
    config.where = where(file, table);
    for (const auto &[key, node] : table) {
        const std::string k(key.str());
        if (!storeSection().accepts(k)) {
            problem(node, "unknown key '" + k + "' in [store]; it takes " + storeSection().keyList());
        } else if (k == "connect_wait_ms") {
            if (auto v = node.value_exact<int64_t>(); v && *v >= 0)
                config.connectWaitMs = *v;
            else
                problem(node, "connect_wait_ms must be an integer >= 0 (how long a start waits for the database "
                              "server; 0 gives up at once)");
        } else if (auto text = node.value<std::string>(); !text || text->empty()) {
            problem(node, k + " in [store] must be a non-empty string");
        } else if (k == "url") {
            // The message never quotes the url: it may hold the password it refuses.
            if (auto checked = store::checkPostgresUrl(*text); !checked)
                problem(node, checked.error().message);
            config.url = *text;
        } else if (k == "password_file") {
            const std::filesystem::path path(*text);
            config.passwordFile = path.is_absolute() ? path : file.parent_path() / path;
        } else if (k == "password_env") {
            config.passwordEnv = *text;
        }
    }
    if (!config.passwordFile.empty() && !config.passwordEnv.empty())
        problem(table, "[store] sets both password_file and password_env: keep the one that holds the password");
    return config;
}

void validateStoreConfig(const StoreConfig &config, ConfigProblems &problems)
{
    // The url and the two password settings are checked where they are read (the file, --store).
    if (!config.postgres() && (!config.passwordFile.empty() || !config.passwordEnv.empty()))
        problems.add(ErrorCode::InvalidArgument,
                     (config.where.empty() ? std::string() : config.where + ": ")
                         + "[store] sets a password but no url: add url = \"postgresql://USER@HOST/DATABASE\" (or pass "
                           "--store), or remove password_file and password_env to keep SQLite");
}

Result<std::string> storeConnectionString(const StoreConfig &config)
{
    if (auto checked = store::checkPostgresUrl(config.url); !checked)
        return std::unexpected(checked.error());
    std::string password;
    if (!config.passwordFile.empty()) {
        auto read = readPasswordFile(config.passwordFile);
        if (!read)
            return std::unexpected(read.error());
        password = std::move(*read);
    } else if (!config.passwordEnv.empty()) {
        const char *value = std::getenv(config.passwordEnv.c_str());
        if (!value || !*value)
            return fail(ErrorCode::FailedPrecondition,
                        "the environment variable " + config.passwordEnv
                            + " (password_env in [store]) is not set: give paddockd the database password in it "
                              "(systemd: EnvironmentFile= in the unit), or use password_file");
        password = value;
    }
    return store::postgresConninfo(config.url, password);
}

std::string passwordSource(const StoreConfig &config)
{
    if (!config.passwordFile.empty())
        return "the file " + config.passwordFile.string() + " (password_file)";
    if (!config.passwordEnv.empty())
        return "the environment variable " + config.passwordEnv + " (password_env)";
    return "none set in [store], so libpq's own: PGPASSWORD, or the file PGPASSFILE names (~/.pgpass by default)";
}

std::string describeStore(const StoreConfig &config, const std::filesystem::path &dataDir)
{
    if (!config.postgres())
        return "SQLite at " + (dataDir / "broker.db").string();
    std::string out = "PostgreSQL at " + store::describePostgresUrl(config.url);
    if (!config.passwordFile.empty())
        out += " (password from " + config.passwordFile.string() + ")";
    else if (!config.passwordEnv.empty())
        out += " (password from $" + config.passwordEnv + ")";
    return out;
}

} // namespace paddock::broker_config
