#include "broker/config/otlp_config.h"

#include "metrics/listen_address.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace paddock::broker_config {

namespace {

constexpr std::uintmax_t kMaxHeaderFileBytes = 16 * 1024;

std::string where(const std::filesystem::path &file, const toml::node &node)
{
    return file.string() + ":" + std::to_string(node.source().begin.line);
}

std::string lower(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

// RFC 9110's token: what a field name may be made of.
bool isHeaderName(const std::string &name)
{
    if (name.empty())
        return false;
    return std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
    });
}

bool isHeaderValue(const std::string &value)
{
    return std::none_of(value.begin(), value.end(), [](unsigned char c) { return c == '\r' || c == '\n' || c == 0; });
}

// A header whose value is a credential: it belongs in a file or the environment, not in broker.toml.
bool looksSecret(const std::string &name)
{
    const std::string n = lower(name);
    for (const char *word : {"auth", "key", "token", "secret", "password", "cookie", "signature"}) {
        if (n.find(word) != std::string::npos)
            return true;
    }
    return false;
}

std::string octalMode(mode_t mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

Result<std::string> readHeaderFile(const std::string &name, const std::filesystem::path &file)
{
    const std::string what = "the file " + file.string() + " (header_files." + name + " in [otlp])";
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) {
        const int error = errno;
        return fail(ErrorCode::FailedPrecondition,
                    "cannot read " + what + ": " + std::strerror(error) + ". Create it holding the header's value on "
                        "one line (e.g. \"Basic <base64 of public-key:secret-key>\" for Langfuse), mode 0600, or fix "
                        "header_files in [otlp]");
    }
    if (!S_ISREG(info.st_mode))
        return fail(ErrorCode::FailedPrecondition, what + " is not a regular file: name the file itself");
    if ((info.st_mode & 077) != 0)
        return fail(ErrorCode::FailedPrecondition,
                    what + " has mode " + octalMode(info.st_mode) + ", which lets group or others read the credential; "
                        "run `chmod 600 " + file.string() + "`");
    if (static_cast<std::uintmax_t>(info.st_size) > kMaxHeaderFileBytes)
        return fail(ErrorCode::FailedPrecondition,
                    what + " is larger than 16 KiB: it must hold the header's value alone, on one line");
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    if (in.is_open())
        text << in.rdbuf();
    if (!in.is_open() || in.bad())
        return fail(ErrorCode::FailedPrecondition, "cannot read " + what + ": check that paddockd's user may read it");
    std::string value = text.str();
    if (const auto end = value.find_first_of("\r\n"); end != std::string::npos)
        value.resize(end);
    if (value.empty())
        return fail(ErrorCode::FailedPrecondition, what + " is empty: write the header's value on its first line");
    if (!isHeaderValue(value))
        return fail(ErrorCode::FailedPrecondition, what + " holds a NUL byte: write the header's value as text");
    return value;
}

// scheme://host[:port][/path] -> host, without brackets. "" when it is not such a URL.
std::string urlHost(const std::string &url, std::string *scheme)
{
    const auto colon = url.find("://");
    if (colon == std::string::npos)
        return {};
    *scheme = lower(url.substr(0, colon));
    std::string rest = url.substr(colon + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    if (const auto at = rest.rfind('@'); at != std::string::npos)
        rest = rest.substr(at + 1);
    if (!rest.empty() && rest.front() == '[') {
        const auto close = rest.find(']');
        return close == std::string::npos ? std::string() : rest.substr(1, close - 1);
    }
    return rest.substr(0, rest.find(':'));
}

} // namespace

const ConfigSection &otlpSection()
{
    static const ConfigSection section{"broker.toml", "[otlp]",
                                       {"endpoint", "headers", "header_files", "header_env", "timeout_ms",
                                        "batch_size", "interval_ms", "max_backoff_ms", "metrics", "service_name"}};
    return section;
}

OtlpConfig parseOtlpConfig(const std::filesystem::path &file, const toml::table &table, OtlpConfig config,
                           ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };
    config.where = where(file, table);
    auto integer = [&](const toml::node &node, const std::string &key, int64_t minimum, const char *meaning) {
        auto v = node.value_exact<int64_t>();
        if (v && *v >= minimum)
            return *v;
        problem(node, key + " in [otlp] must be an integer >= " + std::to_string(minimum) + " (" + meaning + ")");
        return int64_t{-1};
    };
    // A header table: every value a non-empty string, every name a valid field name.
    auto strings = [&](const toml::node &node, const std::string &key) {
        std::map<std::string, std::string> out;
        const auto *inner = node.as_table();
        if (!inner) {
            problem(node, key + " in [otlp] must be a table of header names to strings, e.g. " + key
                              + " = { Authorization = \"...\" }");
            return out;
        }
        for (const auto &[name, value] : *inner) {
            const std::string n(name.str());
            auto text = value.value<std::string>();
            if (!isHeaderName(n))
                problem(value, "'" + n + "' in " + key + " of [otlp] is not a header name (letters, digits and "
                                         "!#$%&'*+-.^_`|~ only)");
            else if (!text || text->empty())
                problem(value, key + "." + n + " in [otlp] must be a non-empty string");
            else if (!isHeaderValue(*text))
                problem(value, key + "." + n + " in [otlp] must be one line");
            else
                out[n] = *text;
        }
        return out;
    };

    for (const auto &[key, node] : table) {
        const std::string k(key.str());
        if (!otlpSection().accepts(k)) {
            problem(node, "unknown key '" + k + "' in [otlp]; it takes " + otlpSection().keyList());
        } else if (k == "endpoint" || k == "service_name") {
            auto text = node.value<std::string>();
            if (!text || text->empty())
                problem(node, k + " in [otlp] must be a non-empty string");
            else if (k == "endpoint")
                config.endpoint = *text;
            else
                config.serviceName = *text;
        } else if (k == "metrics") {
            if (auto v = node.value_exact<bool>())
                config.metrics = *v;
            else
                problem(node, "metrics in [otlp] must be true or false (false for a receiver that takes traces only, "
                              "such as Langfuse or Jaeger)");
        } else if (k == "timeout_ms") {
            if (auto v = integer(node, k, 100, "how long one request may take"); v >= 0)
                config.timeoutMs = v;
        } else if (k == "interval_ms") {
            if (auto v = integer(node, k, 10, "how often the store is looked at for spans that ended"); v >= 0)
                config.intervalMs = v;
        } else if (k == "max_backoff_ms") {
            if (auto v = integer(node, k, 100, "the longest wait between retries of a failing receiver"); v >= 0)
                config.maxBackoffMs = v;
        } else if (k == "batch_size") {
            if (auto v = integer(node, k, 1, "spans per request"); v >= 0) {
                if (v > 100000)
                    problem(node, "batch_size in [otlp] must be at most 100000 (spans per request)");
                else
                    config.batchSize = static_cast<int>(v);
            }
        } else if (k == "headers") {
            for (auto &[name, value] : strings(node, k)) {
                if (looksSecret(name))
                    problem(node, "headers." + name + " in [otlp] looks like a credential, and broker.toml holds no "
                                  "secrets: put its value in a file of mode 0600 and name it in header_files = { "
                                  + name + " = \"FILE\" }, or in an environment variable named by header_env = { "
                                  + name + " = \"VARIABLE\" }");
                else
                    config.headers[name] = value;
            }
        } else if (k == "header_files") {
            for (auto &[name, value] : strings(node, k)) {
                const std::filesystem::path path(value);
                config.headerFiles[name] = path.is_absolute() ? path : file.parent_path() / path;
            }
        } else if (k == "header_env") {
            for (auto &[name, value] : strings(node, k))
                config.headerEnv[name] = value;
        }
    }
    // One source per header: a name given twice (in any case) would send both.
    std::map<std::string, int> seen;
    for (const auto &[name, v] : config.headers)
        ++seen[lower(name)];
    for (const auto &[name, v] : config.headerFiles)
        ++seen[lower(name)];
    for (const auto &[name, v] : config.headerEnv)
        ++seen[lower(name)];
    for (const auto &[name, count] : seen) {
        if (count > 1)
            problem(table, "[otlp] gives the header '" + name + "' more than once (headers, header_files, header_env): "
                           "keep the one that holds its value");
    }
    return config;
}

void validateOtlpConfig(const OtlpConfig &config, ConfigProblems &problems)
{
    const std::string at = config.where.empty() ? std::string() : config.where + ": ";
    if (!config.enabled()) {
        if (!config.where.empty())
            problems.add(ErrorCode::InvalidArgument,
                         at + "[otlp] has no endpoint: add endpoint = \"http://127.0.0.1:4318\" (an OpenTelemetry "
                              "Collector or Jaeger; docs/observability.md), or remove the table to export nothing");
        return;
    }
    {
        // user:password@ in the URL: a credential in broker.toml (and in every message quoting it).
        const auto authority = config.endpoint.find("://");
        const std::string rest = authority == std::string::npos ? config.endpoint : config.endpoint.substr(authority + 3);
        if (rest.substr(0, rest.find_first_of("/?#")).find('@') != std::string::npos) {
            problems.add(ErrorCode::InvalidArgument,
                         at + "[otlp] endpoint holds a user name or password (USER:PASSWORD@), and broker.toml holds "
                              "no secrets: remove it from the URL and send the credential as a header from header_files "
                              "or header_env (e.g. Authorization = \"Basic ...\")");
            return;
        }
    }
    std::string scheme;
    const std::string host = urlHost(config.endpoint, &scheme);
    if (host.empty() || (scheme != "http" && scheme != "https")) {
        problems.add(ErrorCode::InvalidArgument,
                     at + "[otlp] endpoint \"" + config.endpoint + "\" is not an http:// or https:// URL: give the "
                          "receiver's base URL, e.g. \"http://127.0.0.1:4318\" (paddockd adds /v1/traces and /v1/metrics)");
        return;
    }
    if (config.endpoint.find("/v1/traces") != std::string::npos || config.endpoint.find("/v1/metrics") != std::string::npos)
        problems.add(ErrorCode::InvalidArgument,
                     at + "[otlp] endpoint \"" + config.endpoint + "\" names a signal's path: give the base URL "
                          "without /v1/traces or /v1/metrics (paddockd adds them)");
    const bool credentials = !config.headerFiles.empty() || !config.headerEnv.empty();
    if (credentials && scheme == "http" && !metrics::isLoopbackHost(host))
        problems.add(ErrorCode::InvalidArgument,
                     at + "[otlp] sends headers from header_files/header_env (credentials) to " + config.endpoint
                         + " in plaintext: use an https:// endpoint, or a receiver on this host (127.0.0.1)");
    if (config.maxBackoffMs < config.intervalMs)
        problems.add(ErrorCode::InvalidArgument,
                     at + "[otlp] max_backoff_ms (" + std::to_string(config.maxBackoffMs) + ") is below interval_ms ("
                         + std::to_string(config.intervalMs) + "): raise max_backoff_ms or lower interval_ms");
}

Result<std::vector<std::pair<std::string, std::string>>> otlpHeaders(const OtlpConfig &config)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto &[name, value] : config.headers)
        out.emplace_back(name, value);
    for (const auto &[name, path] : config.headerFiles) {
        auto value = readHeaderFile(name, path);
        if (!value)
            return std::unexpected(value.error());
        out.emplace_back(name, std::move(*value));
    }
    for (const auto &[name, variable] : config.headerEnv) {
        const char *value = std::getenv(variable.c_str());
        if (!value || !*value)
            return fail(ErrorCode::FailedPrecondition,
                        "the environment variable " + variable + " (header_env." + name + " in [otlp]) is not set: give "
                            "paddockd the header's value in it (systemd: EnvironmentFile= in the unit), or use "
                            "header_files");
        if (!isHeaderValue(value))
            return fail(ErrorCode::FailedPrecondition,
                        "the environment variable " + variable + " (header_env." + name
                            + " in [otlp]) holds a line break: the header's value must be one line");
        out.emplace_back(name, value);
    }
    return out;
}

} // namespace paddock::broker_config
