// paddockctl submit --file: check every line, then keep kSubmitsInFlight SubmitSession calls in
// flight, printing the created ids in line order as they come.
//
// Known limits:
// - The file is read whole into memory (a line is a few hundred bytes: a million sessions is a few
//   hundred MB); a playbook file named by many lines is read once.
// - The request_id is random per line and per run, so running a file twice submits it twice (the
//   broker deduplicates a request_id, not a line). A call that gets no answer is not sent again
//   (lines are listed as not submitted); `paddockctl submit` alone retries with its id.

#include "cli/submit_file.h"

#include "cli/cost_commands.h"
#include "cli/format.h"
#include "common/result.h"

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>

namespace paddock::cli {

namespace {

using nlohmann::json;

constexpr size_t kMaxProblemsShown = 20;
constexpr size_t kMaxLinesListed = 20;
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// The text of a playbook file, read once per path (a fleet's file names a few playbooks many times).
class PlaybookFiles {
public:
    // The file's text; nullopt with the problem set when it cannot be read.
    std::optional<std::string> read(const std::string &path, SubmitLineProblem &problem)
    {
        if (auto it = m_texts.find(path); it != m_texts.end())
            return it->second;
        std::ifstream file(path, std::ios::binary);
        std::ostringstream text;
        text << file.rdbuf();
        if (!file || file.bad()) {
            problem.code = ExitCode::Error;
            problem.message = "cannot read playbook file " + path + "; check that it is readable";
            return std::nullopt;
        }
        return m_texts.emplace(path, text.str()).first->second;
    }

private:
    std::map<std::string, std::string> m_texts;
};

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string parseErrorText(const std::exception &e)
{
    std::string text = e.what();
    if (text.starts_with("[json.exception.")) {
        if (const auto end = text.find("] "); end != std::string::npos)
            text = text.substr(end + 2);
    }
    // The parser sees one line at a time: its "line 1" is the file's line, named already.
    if (const auto at = text.find(" at line 1, column "); at != std::string::npos)
        text.replace(at, std::string_view(" at line 1, column ").size(), " at column ");
    return text;
}

std::string typeName(const json &value)
{
    return value.is_discarded() ? "nothing" : value.type_name();
}

// Fills line.request from the object's fields; the first problem found, if any.
std::optional<SubmitLineProblem> readFields(const json &object, SubmitLine &line, PlaybookFiles &files)
{
    auto problem = [&](std::string message, ExitCode code = ExitCode::InvalidArgument) {
        return SubmitLineProblem{line.line, code, std::move(message)};
    };
    auto &request = line.request;
    std::string playbook;
    for (const auto &[key, value] : object.items()) {
        const bool list = key == "tags" || key == "secrets";
        if (key == "budget") {
            if (!value.is_string() && !value.is_number())
                return problem("\"budget\" is a " + typeName(value) + "; give US dollars, e.g. 0.05 or \"0.05\"");
            const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
            const auto micros = parseDollars(text);
            if (!micros)
                return problem("\"budget\" " + text + " is not an amount of US dollars (e.g. 0.05)");
            request.set_budget_micros(*micros);
        } else if (list) {
            const bool strings = value.is_array() && std::all_of(value.begin(), value.end(), [](const json &item) {
                                     return item.is_string() && !item.get<std::string>().empty();
                                 });
            if (!strings)
                return problem("\"" + key + "\" must be an array of names, e.g. [\"a\", \"b\"]");
            for (const auto &item : value) {
                if (key == "tags")
                    request.add_tags(item.get<std::string>());
                else
                    request.add_secrets(item.get<std::string>());
            }
        } else if (key == "playbook" || key == "playbook_toml" || key == "goal" || key == "model" || key == "tier"
                   || key == "agent") {
            if (!value.is_string())
                return problem("\"" + key + "\" is a " + typeName(value) + "; give a string");
            const std::string text = value.get<std::string>();
            if (key == "playbook")
                playbook = text;
            else if (key == "playbook_toml")
                request.set_playbook_toml(text);
            else if (key == "goal")
                request.set_goal(text);
            else if (key == "model")
                request.set_model(text);
            else if (key == "tier")
                request.set_tier(text);
            else
                request.set_agent(text);
        } else {
            return problem("unknown field \"" + key + "\"; a line may have " + std::string(kSubmitFileFields));
        }
    }

    if (!playbook.empty() && !request.playbook_toml().empty())
        return problem("give either \"playbook\" (a name or a file) or \"playbook_toml\" (its text), not both");
    if (!playbook.empty()) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(playbook, ec)) {
            SubmitLineProblem unreadable{line.line, ExitCode::Error, {}};
            auto text = files.read(playbook, unreadable);
            if (!text)
                return unreadable;
            request.set_playbook_toml(std::move(*text));
            line.playbookFile = playbook;
        } else if (looksLikePath(playbook)) {
            return problem("there is no playbook file " + playbook + "; check the path (relative to the working "
                           "directory), or give the name of a playbook the broker ships (e.g. hello-c)",
                           ExitCode::NotFound);
        } else {
            request.set_playbook(playbook);
        }
    }
    const bool hasPlaybook = !request.playbook().empty() || !request.playbook_toml().empty();
    if (!hasPlaybook && request.goal().empty())
        return problem("say what to run: \"playbook\" (a name or a file), \"playbook_toml\", or \"goal\" with "
                       "\"model\"");
    if (!hasPlaybook && request.model().empty())
        return problem("\"goal\" needs \"model\" (e.g. openai), or a \"playbook\" for the scripted model");
    return std::nullopt;
}

std::vector<std::string_view> splitLines(std::string_view text)
{
    std::vector<std::string_view> lines;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        lines.push_back(line);
        if (end == text.size())
            break;
        start = end + 1;
    }
    return lines;
}

bool blank(std::string_view line)
{
    return line.find_first_not_of(" \t") == std::string_view::npos;
}

// "7, 12, 40" for the first kMaxLinesListed numbers, then "and N more".
std::string listLines(const std::vector<int> &lines)
{
    std::string text;
    for (size_t i = 0; i < lines.size() && i < kMaxLinesListed; ++i)
        text += (i == 0 ? "" : ", ") + std::to_string(lines[i]);
    if (lines.size() > kMaxLinesListed)
        text += " and " + std::to_string(lines.size() - kMaxLinesListed) + " more";
    return text;
}

// The calls in flight and their answers. The gRPC callbacks only queue an answer and wake the
// caller's thread, which does everything else.
class SubmitRun {
public:
    SubmitRun(const BrokerCall &call, const std::vector<SubmitLine> &lines) : m_call(call), m_lines(lines)
    {
        m_calls.resize(lines.size());
    }

    void start(size_t index)
    {
        auto &slot = m_calls[index];
        slot = std::make_unique<Call>();
        m_call.setDeadline(slot->context);
        ++m_inFlight;
        m_call.stubs.sessions->async()->SubmitSession(&slot->context, &m_lines[index].request, &slot->session,
                                                      [this, index](grpc::Status status) {
                                                          {
                                                              std::lock_guard lock(m_mutex);
                                                              m_answers.push_back({index, std::move(status)});
                                                          }
                                                          m_answered.notify_one();
                                                      });
    }

    // The answers that came in since the last call, waiting up to timeout for the first of them.
    std::deque<std::pair<size_t, grpc::Status>> answers(std::chrono::milliseconds timeout)
    {
        std::unique_lock lock(m_mutex);
        m_answered.wait_for(lock, timeout, [&] { return !m_answers.empty(); });
        std::deque<std::pair<size_t, grpc::Status>> out;
        out.swap(m_answers);
        m_inFlight -= static_cast<int>(out.size());
        return out;
    }

    int inFlight() const { return m_inFlight; }
    // The session a call created; the call's memory goes once its line is printed.
    v1::Session &session(size_t index) { return m_calls[index]->session; }
    void release(size_t index) { m_calls[index].reset(); }

    // Waits for every call still in flight (their callbacks use this object).
    ~SubmitRun()
    {
        while (m_inFlight > 0)
            answers(std::chrono::milliseconds(1000));
    }

private:
    struct Call {
        grpc::ClientContext context;
        v1::Session session;
    };

    const BrokerCall &m_call;
    const std::vector<SubmitLine> &m_lines;
    std::vector<std::unique_ptr<Call>> m_calls;   // by line index, while in flight or unprinted
    int m_inFlight = 0;                           // the caller's thread only

    std::mutex m_mutex;
    std::condition_variable m_answered;
    std::deque<std::pair<size_t, grpc::Status>> m_answers;   // guarded by m_mutex
};

// "submitted N/M" on one terminal line, redrawn at most every kProgressInterval.
class Progress {
public:
    Progress(std::ostream &err, bool on, size_t total) : m_err(err), m_on(on), m_total(total) {}

    void show(size_t done, bool force = false)
    {
        if (!m_on)
            return;
        const auto now = std::chrono::steady_clock::now();
        if (!force && now - m_last < kProgressInterval)
            return;
        m_last = now;
        m_err << "\rsubmitted " << done << "/" << m_total << std::flush;
        m_shown = true;
    }
    // Clears the line so a message can take it; the next show() draws it again.
    void clear()
    {
        if (m_shown)
            m_err << "\r\033[K";
        m_shown = false;
    }
    void finish(size_t done)
    {
        if (!m_on)
            return;
        show(done, true);
        m_err << "\n";
        m_shown = false;
    }

private:
    std::ostream &m_err;
    const bool m_on;
    const size_t m_total;
    bool m_shown = false;
    std::chrono::steady_clock::time_point m_last{};
};

Result<std::string> readInput(const std::string &file, std::istream &input)
{
    std::ostringstream text;
    if (file == "-") {
        text << input.rdbuf();
        return text.str();
    }
    std::error_code ec;
    if (!std::filesystem::exists(file, ec))
        return fail(ErrorCode::NotFound, "there is no file " + file + "; check the path, or pass - to read stdin");
    std::ifstream stream(file, std::ios::binary);
    text << stream.rdbuf();
    if (!stream || stream.bad())
        return fail(ErrorCode::Unavailable, "cannot read " + file + "; check that it is a readable file");
    return text.str();
}

} // namespace

bool looksLikePath(const std::string &text)
{
    return text.find('/') != std::string::npos || text.ends_with(".toml");
}

grpc::Status nameThePlaybookFile(const grpc::Status &status, const std::string &file, bool *named)
{
    *named = false;
    if (file.empty())
        return status;
    std::string message = status.error_message();
    for (const std::string placeholder : {"<submitted playbook>", "<submitted>"}) {
        for (auto at = message.find(placeholder); at != std::string::npos; at = message.find(placeholder)) {
            message.replace(at, placeholder.size(), file);
            *named = true;
        }
    }
    return grpc::Status(status.error_code(), message, status.error_details());
}

std::string newRequestId()
{
    thread_local std::mt19937_64 random{std::random_device{}()};
    uint64_t high = random();
    uint64_t low = random();
    high = (high & ~uint64_t{0xF000}) | 0x4000;                      // version 4
    low = (low & ~(uint64_t{0x3} << 62)) | (uint64_t{0x2} << 62);    // variant 10
    char text[37];
    std::snprintf(text, sizeof text, "%08llx-%04llx-%04llx-%04llx-%012llx",
                  static_cast<unsigned long long>(high >> 32), static_cast<unsigned long long>((high >> 16) & 0xFFFF),
                  static_cast<unsigned long long>(high & 0xFFFF), static_cast<unsigned long long>(low >> 48),
                  static_cast<unsigned long long>(low & 0xFFFFFFFFFFFFull));
    return text;
}

SubmitFile parseSubmitFile(std::string_view text)
{
    SubmitFile parsed;
    PlaybookFiles files;
    const auto lines = splitLines(text);
    for (size_t i = 0; i < lines.size(); ++i) {
        const int number = static_cast<int>(i + 1);
        if (blank(lines[i]))
            continue;
        json object;
        try {
            object = json::parse(lines[i]);
        } catch (const json::exception &e) {
            parsed.problems.push_back({number, ExitCode::InvalidArgument, "not valid JSON: " + parseErrorText(e)});
            continue;
        }
        if (!object.is_object()) {
            parsed.problems.push_back({number, ExitCode::InvalidArgument,
                                       "expected a JSON object with the fields of submit's flags, e.g. "
                                       "{\"playbook\": \"hello-c\", \"tags\": [\"batch\"]}; got "
                                           + typeName(object)});
            continue;
        }
        SubmitLine line;
        line.line = number;
        if (auto problem = readFields(object, line, files)) {
            parsed.problems.push_back(std::move(*problem));
            continue;
        }
        line.request.set_request_id(newRequestId());
        parsed.lines.push_back(std::move(line));
    }
    return parsed;
}

int runSubmitFile(const Invocation &inv, const BrokerCall &call, std::istream &input, bool progress,
                  std::ostream &out, std::ostream &err)
{
    const std::string &file = inv.submitFile;
    const std::string where = file == "-" ? "stdin" : file;
    auto text = readInput(file, input);
    if (!text) {
        err << "paddockctl: cannot submit the sessions: " << text.error().message << "\n";
        return toInt(text.error().code == ErrorCode::NotFound ? ExitCode::NotFound : ExitCode::Error);
    }

    // Every line checked before anything is sent: a file half submitted is worse than none.
    const SubmitFile parsed = parseSubmitFile(*text);
    if (!parsed.problems.empty()) {
        for (size_t i = 0; i < parsed.problems.size() && i < kMaxProblemsShown; ++i) {
            const auto &problem = parsed.problems[i];
            err << "paddockctl submit: " << where << ":" << problem.line << ": " << problem.message << "\n";
        }
        if (parsed.problems.size() > kMaxProblemsShown)
            err << "paddockctl submit: ... and " << parsed.problems.size() - kMaxProblemsShown << " more\n";
        const size_t count = parsed.problems.size();
        err << "paddockctl submit: nothing was submitted: fix the " << (count == 1 ? "line" : std::to_string(count) + " lines")
            << " above in " << where << " and run again\n";
        return toInt(parsed.problems.front().code);
    }
    const auto &lines = parsed.lines;
    if (lines.empty()) {
        err << "paddockctl submit: " << where << " holds no sessions: write one JSON object a line, e.g. "
            << "{\"playbook\": \"hello-c\"}\n";
        return toInt(ExitCode::InvalidArgument);
    }

    Progress shown(err, progress, lines.size());
    std::vector<std::optional<grpc::Status>> outcomes(lines.size());   // by line index, once answered
    std::vector<int> refused;                                           // line numbers
    std::optional<ExitCode> firstFailure;                               // of the first refused line
    int firstFailureLine = 0;
    json created = json::array();
    size_t next = 0;       // the next line to send
    size_t printed = 0;    // lines before this one are printed (or reported)
    size_t answered = 0;
    size_t submitted = 0;
    bool stopped = false;  // the broker is gone: send nothing more
    {
        SubmitRun run(call, lines);
        while (printed < lines.size()) {
            while (!stopped && next < lines.size() && run.inFlight() < kSubmitsInFlight)
                run.start(next++);
            if (run.inFlight() == 0)
                break;   // stopped, and everything sent has answered
            for (auto &[index, status] : run.answers(std::chrono::milliseconds(kProgressInterval))) {
                ++answered;
                const SubmitLine &line = lines[index];
                if (status.ok()) {
                    ++submitted;
                } else {
                    const bool connected = call.connected();
                    const ExitCode code = exitCodeFor(status.error_code(), connected);
                    refused.push_back(line.line);
                    if (!firstFailure || line.line < firstFailureLine) {
                        firstFailure = code;
                        firstFailureLine = line.line;
                    }
                    // One message when the broker is gone, not one per call in flight.
                    if (!stopped) {
                        bool named = false;
                        const grpc::Status shownStatus = nameThePlaybookFile(status, line.playbookFile, &named);
                        std::string hint;
                        if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT && !line.playbookFile.empty()
                            && !named)
                            hint = "fix " + line.playbookFile + " and submit that line again";
                        shown.clear();
                        call.fail(err, where + ":" + std::to_string(line.line) + ": cannot submit the session",
                                  shownStatus, hint);
                    }
                    if (code == ExitCode::BrokerUnreachable)
                        stopped = true;
                }
                outcomes[index] = std::move(status);
            }
            // Ids in line order as the answers allow: line i's output never comes after line i+1's.
            for (; printed < lines.size() && outcomes[printed]; ++printed) {
                if (outcomes[printed]->ok()) {
                    const v1::Session &session = run.session(printed);
                    if (inv.output == OutputFormat::Json) {
                        json object = sessionToJson(session);
                        object["line"] = lines[printed].line;
                        created.push_back(std::move(object));
                    } else {
                        out << session.id() << "\n";
                    }
                }
                run.release(printed);
            }
            if (inv.output == OutputFormat::Table)
                out.flush();   // a pipe reader sees the ids as they come
            shown.show(answered);
        }
    }
    shown.finish(answered);
    if (inv.output == OutputFormat::Json)
        out << created.dump(2) << "\n";

    if (refused.empty())
        return toInt(ExitCode::Ok);
    std::sort(refused.begin(), refused.end());
    err << "paddockctl submit: " << submitted << " of " << lines.size() << " sessions from " << where
        << " submitted; not submitted: line" << (refused.size() == 1 ? " " : "s ") << listLines(refused);
    if (next < lines.size()) {
        err << "; nothing was sent from line " << lines[next].line << " on (" << lines.size() - next
            << " sessions): once the broker is back, submit those lines again";
    }
    err << "\n";
    return toInt(*firstFailure);
}

} // namespace paddock::cli
