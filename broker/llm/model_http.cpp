#include "broker/llm/model_http.h"

#include "common/clock.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>

namespace paddock::llm {

namespace {

constexpr size_t kExcerptChars = 300;
constexpr std::uintmax_t kMaxKeyFileBytes = 16 * 1024;

Result<std::string> readKeyFile(const std::string &modelName, std::string_view section, const std::filesystem::path &file)
{
    const std::string name = file.string();
    auto problem = [&](const std::string &what) {
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("model '{}': the api_key_file {} {}", modelName, name, what));
    };
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) {
        const int error = errno;
        return problem(fmt::format("cannot be read ({}). Create it holding the API key on one line, mode 0600, or "
                                   "fix api_key_file in the {} config.",
                                   std::strerror(error), section));
    }
    if (!S_ISREG(info.st_mode))
        return problem("is not a regular file. Name the file that holds the key itself.");
    if ((info.st_mode & 077) != 0)
        return problem(fmt::format("has mode {:04o}, which lets group or others read the key. Run `chmod 600 {}`.",
                                   info.st_mode & 07777, name));
    if (static_cast<std::uintmax_t>(info.st_size) > kMaxKeyFileBytes)
        return problem("is larger than 16 KiB. It must hold the API key alone, on one line.");
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    if (in.is_open())
        text << in.rdbuf();
    if (!in.is_open() || in.bad())
        return problem("cannot be read. Check that paddockd's user may read it.");
    std::string key = text.str();
    if (const auto end = key.find_first_of("\r\n"); end != std::string::npos)
        key.resize(end);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t'))
        key.pop_back();
    if (key.empty())
        return problem("is empty. Write the API key in it, on one line.");
    return key;
}

} // namespace

std::string excerpt(std::string_view text)
{
    std::string out;
    size_t end = std::min(text.size(), kExcerptChars);
    while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        --end;   // never split a UTF-8 sequence: messages end up in JSON
    for (char c : text.substr(0, end)) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (static_cast<unsigned char>(c) < 0x20)
            out += ' ';
        else
            out += c;
    }
    if (text.size() > kExcerptChars)
        out += fmt::format("... ({} bytes)", text.size());
    if (text.empty())
        out = "(empty body)";
    return out;
}

std::string jsonText(const nlohmann::json &value)
{
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string toolResultText(const nlohmann::json &result)
{
    std::string text = jsonText(result);
    if (text.size() <= kMaxToolResultChars)
        return text;
    const size_t half = kMaxToolResultChars / 2;
    return text.substr(0, half) + fmt::format("\n[... {} characters cut ...]\n", text.size() - 2 * half)
        + text.substr(text.size() - half);
}

Result<std::string> readApiKey(const std::string &modelName, std::string_view section, const ApiKeySource &source)
{
    if (!source.file.empty())
        return readKeyFile(modelName, section, source.file);
    if (source.envVariable.empty())
        return std::string();
    const char *value = std::getenv(source.envVariable.c_str());
    if (value == nullptr || *value == '\0')
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("model '{}' needs an API key in the environment variable {}, which is not set for the "
                                "broker. Set it where paddockd starts, or change api_key_env in the {} config.",
                                modelName, source.envVariable, section));
    return std::string(value);
}

void TurnStream::begin(int attempt)
{
    m_attempt = attempt;
    m_parser = SseParser();
    m_events.clear();
    reset();
}

std::string TurnStream::data(std::string_view bytes)
{
    m_events.clear();
    if (auto fed = m_parser.feed(bytes, m_events); !fed)
        return "malformed server-sent events: " + fed.error().message;
    for (const SseEvent &event : m_events) {
        // A decoder reads what it needs by type; anything it still could not read (nlohmann throws
        // on a field of another type) breaks the stream with the reason, never the broker: this runs
        // inside curl's write callback.
        try {
            if (std::string wrong = onEvent(event); !wrong.empty())
                return wrong;
        } catch (const std::exception &e) {
            return "an event the adapter could not read (" + std::string(e.what()) + "): \"" + excerpt(event.data) + "\"";
        }
    }
    return {};
}

std::string TurnStream::end()
{
    if (auto finished = m_parser.finish(); !finished)
        return "malformed server-sent events: " + finished.error().message;
    return missingEnd();
}

void TurnStream::deliver(ModelDelta delta)
{
    if (!m_sink)
        return;
    delta.attempt = m_attempt;
    m_sink(delta);
}

void submitTurn(HttpLoop &loop, const std::string &modelName, const std::function<Result<TurnCall>()> &build,
                ModelAdapter::TurnDone done)
{
    Result<TurnCall> call;
    try {
        call = build();
    } catch (const std::exception &e) {
        call = fail(ErrorCode::Internal, fmt::format("model '{}': unexpected error: {}", modelName, e.what()));
    }
    if (!call) {
        done(std::unexpected(std::move(call.error())));
        return;
    }
    const int64_t startUs = monotonicUs();
    loop.submit(std::move(call->request), [modelName, startUs, interpret = std::move(call->interpret),
                                           done = std::move(done)](HttpResult result) {
        const int attempts = result.attempts;
        Result<ModelTurn> turn;
        // nlohmann throws on invalid UTF-8 and type errors: they stay values on the loop thread too.
        try {
            turn = interpret(std::move(result));
        } catch (const std::exception &e) {
            turn = fail(ErrorCode::Internal, fmt::format("model '{}': unexpected error: {}", modelName, e.what()));
        }
        if (turn) {
            turn->attempts = attempts;
            turn->latencyMs = static_cast<double>(monotonicUs() - startUs) / 1000.0;
        }
        done(std::move(turn));
    });
}

Result<ModelTurn> waitForTurn(const HttpLoop &loop, const std::string &modelName,
                              const std::function<void(ModelAdapter::TurnDone)> &start)
{
    if (loop.onLoopThread())
        return fail(ErrorCode::Internal, fmt::format("model '{}': next() was called from a completion callback, where "
                                                     "it would wait for itself; use nextAsync",
                                                     modelName));
    std::promise<Result<ModelTurn>> promise;
    auto future = promise.get_future();
    start([&promise](Result<ModelTurn> turn) { promise.set_value(std::move(turn)); });
    return future.get();
}

std::optional<Error> unansweredError(const HttpResult &result, const std::string &url, std::string_view section)
{
    using End = HttpResult::End;
    switch (result.end) {
    case End::Cancelled:
        return Error{ErrorCode::Cancelled,
                     fmt::format("the request to the model API at {} was cancelled: the broker is stopping. Nothing "
                                 "was recorded; the step asks again when the broker restarts.",
                                 url)};
    case End::TooLarge:
        return Error{ErrorCode::InvalidArgument,
                     fmt::format("the model API at {} sent a response larger than {} bytes; check base_url", url,
                                 kMaxModelResponseBytes)};
    case End::CannotSend:
        return Error{ErrorCode::FailedPrecondition,
                     fmt::format("cannot send a request to the model API at {}: {}. Check base_url in the {} config.",
                                 url, result.error, section)};
    case End::ConnectionError:
    case End::BrokenStream:
    case End::Answered:
        break;
    }
    return std::nullopt;
}

} // namespace paddock::llm
