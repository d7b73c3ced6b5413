#pragma once
// [otlp] in broker.toml: where paddockd exports every session's trace (and its GenAI metrics) as
// OTLP/HTTP with the JSON encoding (broker/otlp/, docs/observability.md). Off without the table.
//
//   [otlp]
//   endpoint = "https://cloud.langfuse.com/api/public/otel"    # spans go to {endpoint}/v1/traces
//   header_files = { Authorization = "langfuse.auth" }        # "Basic ..." on the file's first line, mode 0600
//   metrics = false                                            # Langfuse and Jaeger take traces only
//
// Header values that are secrets never sit in broker.toml: an inline header whose name says it holds
// one (Authorization, a key, a token, a secret, a password) is refused, and header_files or
// header_env (the name of an environment variable) say where its value is, as [store]'s
// password_file and password_env do.
//
// Threads: plain values and pure functions.

#include "common/config_problems.h"
#include "common/result.h"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace paddock::broker_config {

struct OtlpConfig {
    std::string endpoint;                                     // empty: no export
    std::map<std::string, std::string> headers;               // name -> value, inline (no secrets)
    std::map<std::string, std::filesystem::path> headerFiles; // name -> file holding the value (mode 0600)
    std::map<std::string, std::string> headerEnv;             // name -> environment variable holding the value
    int64_t timeoutMs = 10000;        // per request
    int batchSize = 512;              // spans (or model calls, for metrics) per request
    int64_t intervalMs = 1000;        // how often the store is looked at for spans that ended
    int64_t maxBackoffMs = 30000;     // retries of a receiver that fails back off up to this
    bool metrics = true;              // also POST {endpoint}/v1/metrics
    std::string serviceName = "paddockd";   // the resource's service.name
    std::string where;                // "file:line" of [otlp], for messages

    bool enabled() const { return !endpoint.empty(); }
};

// The [otlp] table's keys.
const ConfigSection &otlpSection();

// Reads [otlp] over `config`; header_files paths relative to the file's folder. Problems name
// file:line: an unknown key, a value of the wrong type or range, a secret-looking inline header,
// one header given twice.
OtlpConfig parseOtlpConfig(const std::filesystem::path &file, const toml::table &table, OtlpConfig config,
                           ConfigProblems &problems);

// What holds across keys: an endpoint that is an http(s) URL; headers from files or the environment
// only over https or to a loopback host (they are credentials).
void validateOtlpConfig(const OtlpConfig &config, ConfigProblems &problems);

// Every header to send, the values of header_files and header_env read now. Errors name the file
// or the variable and the fix (FailedPrecondition): missing, readable by others, empty; a variable
// not set. No error or log line holds a value.
Result<std::vector<std::pair<std::string, std::string>>> otlpHeaders(const OtlpConfig &config);

} // namespace paddock::broker_config
