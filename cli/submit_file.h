#pragma once
// paddockctl submit --file FILE: many sessions at once, from a JSON Lines file (or stdin, "-"): one
// object a line with the fields of submit's flags. The whole file is checked before anything is
// sent, and every bad line is named by its number; then the sessions go to the broker 16 at a
// time, each with a request_id of its own. A submit the broker refuses is named by its line with
// the broker's message, the other lines still go in, and the exit code says something failed.
//
// Also what the single submit shares with it: how a --playbook argument is told from a file, and
// the broker's messages about submitted playbook text naming the file instead.
//
// Threads: runSubmitFile runs on the caller's thread, which does all the printing and starts every
// call; the calls' gRPC callbacks only queue their answers for it.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "cli/exit_codes.h"

#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::cli {

inline constexpr int kSubmitsInFlight = 16;

// The JSON fields of a line, as submit's flags name them.
inline constexpr std::string_view kSubmitFileFields =
    "playbook, playbook_toml, goal, model, tier, agent, tags, secrets, budget";

// A --playbook argument (or a line's "playbook") that names a file sends the file's text; anything
// else that looks like a path (a '/', or ending in .toml) is a file that is not there.
bool looksLikePath(const std::string &text);

// The broker parses submitted playbook text under a placeholder name; the user knows it as a file.
// named: whether the message named the playbook (so a "fix FILE" hint would repeat it).
grpc::Status nameThePlaybookFile(const grpc::Status &status, const std::string &file, bool *named);

// One line of the file, checked: what it sends.
struct SubmitLine {
    int line = 0;                        // 1-based, as editors count
    v1::SubmitSessionRequest request;    // with a fresh request_id
    std::string playbookFile;            // the file "playbook" named, whose text the request carries
};

struct SubmitLineProblem {
    int line = 0;
    ExitCode code = ExitCode::InvalidArgument;
    std::string message;                 // what is wrong and how to fix it, without the line number
};

struct SubmitFile {
    std::vector<SubmitLine> lines;
    std::vector<SubmitLineProblem> problems;   // in line order; nothing may be sent unless empty
};

// Checks every line of text (blank lines are skipped). A "playbook" that names a file is read here
// (once per file), relative to the working directory like --playbook.
SubmitFile parseSubmitFile(std::string_view text);

// A request_id: 128 random bits in the 8-4-4-4-12 hex form of a version 4 UUID.
std::string newRequestId();

// submit --file: inv.submitFile names the file ("-": input). progress: show "submitted N/M" on err
// (a terminal) while the calls run.
int runSubmitFile(const Invocation &inv, const BrokerCall &call, std::istream &input, bool progress,
                  std::ostream &out, std::ostream &err);

} // namespace paddock::cli
