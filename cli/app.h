#pragma once
// paddockctl: argument parsing and the commands, as a library so tests can drive it without a shell.
// main.cpp only installs the Ctrl-C handler and calls runCli.
//
// Threads: runCli runs on the caller's thread and blocks on the broker; while following a stream it
// starts one helper thread that cancels the call when Environment::interrupted turns true.

#include "cli/format.h"

#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace paddock::cli {

inline constexpr double kDefaultTimeoutS = 30.0;

enum class Command { Submit, List, Show, Events, Trace, Cancel, Pause, Resume, Pools, SecretsSet, SecretsList, SecretsRemove,
                     PostMortemsList, PostMortemsShow, PostMortemsFiles, PostMortemsCat, PostMortemsDownload,
                     SnapshotList, DebugShell, OverrideTier, ReviewsList, ReviewsShow, ReviewsApprove, ReviewsReject,
                     ReviewsStats, Cost, Budgets, Whoami, TokensCreate, TokensList, TokensRevoke, Audit,
                     AgentsCreate, AgentsList, AgentsShow, AgentsEdit, AgentsRecordsSet, AgentsRecordsGet,  // agents_commands.h
                     DecisionsList, DecisionsStats,                                                          // decisions_commands.h
                     Storage, StorageCollect };                                                              // storage_commands.h

// Everything the command line said. Fields that a command does not use stay at their defaults.
struct Invocation {
    Command command = Command::List;
    std::optional<std::string> broker;          // --broker
    OutputFormat output = OutputFormat::Table;
    double timeoutS = kDefaultTimeoutS;         // deadline of every call that is not a follow
    std::string tlsCa;                          // --tls-ca: CA of a TCP broker's certificate
    std::string tokenFile;                      // --token-file: the bearer token for a TCP broker

    // submit
    std::string playbook;                       // a name, or a file whose text is sent
    std::string goal;
    std::string model;
    std::string tier;
    std::vector<std::string> tags;
    std::vector<std::string> secrets;           // submit --secret: names granted to the session
    bool follow = false;                        // submit -f, events -f
    std::string submitFile;                     // submit --file: JSON Lines of sessions; "-": stdin (cli/submit_file.h)
    std::string requestId;                      // submit --request-id; empty: a fresh UUID

    // submit and ls
    std::string agent;

    // ls
    std::vector<std::string> statuses;
    std::string search;
    int limit = 0;                              // 0: one page of the broker's default size
    bool all = false;

    // show, events, trace, cancel, pause, resume, override (with tier)
    std::string sessionId;
    std::string reason;
    int64_t fromSeq = 1;

    // secrets set, secrets rm
    std::string secretName;

    // postmortems, snapshot ls, debug-shell (cli/operator_commands.h)
    std::string postMortemId;                   // SANDBOX or POOL/SANDBOX
    std::string pool;                           // --pool, snapshot ls POOL
    std::string snapshotRef;                    // snapshot ls REF
    std::string path;                           // a path inside the snapshot
    std::string outputFile;                     // download -o
    std::string sessionFilter;                  // postmortems ls --session
    std::string debugCommand;                   // debug-shell --command

    // reviews, cost, budgets (cli/review_commands.h, cli/cost_commands.h)
    std::vector<std::string> reviewIds;
    std::vector<std::string> hashes;            // reviews approve --hash [ID=]HASH
    std::string reviewState = "pending";        // reviews ls --state
    std::string reviewKind;                     // reviews ls --kind
    std::string costBy = "session";             // cost --by
    std::string since;                          // cost --since
    std::string bucket;                         // cost --bucket
    std::string budget;                         // submit --budget USD

    // tokens, audit (cli/auth_commands.h)
    std::string tokenPrincipal;
    std::string tokenDescription;
    std::string tokenTtl;                       // "30d"
    std::string tokenId;
    std::string auditPrincipal;
    std::string auditMethod;
    std::string auditSince;                     // "1h"

    // agents (cli/agents_commands.h): create and edit options; edit changes those in agentGiven
    std::string agentName, agentOwner, agentDefaultTier, agentMode;
    std::vector<std::string> agentAllowedTiers;
    double agentBudgetSessionUsd = 0, agentBudgetDayUsd = 0;
    std::set<std::string> agentGiven;
    std::string recordKey, recordJson;
    // decisions (cli/decisions_commands.h); ls also uses sessionFilter, agent, tier and limit
    std::string decisionChooser, decisionOutcome, decisionGroupBy;
    // storage collect (cli/storage_commands.h)
    bool dryRun = false;
};

struct ParseOutcome {
    std::optional<Invocation> invocation;   // set when a command should run
    int exitCode = 0;                       // otherwise exit with this (help, --version, usage error)
};

// args excludes the program name. Help and --version go to out, usage errors to err.
ParseOutcome parseCommandLine(const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

struct Environment {
    std::optional<std::string> brokerAddress;   // $PADDOCK_BROKER
    std::optional<std::string> token;           // $PADDOCK_TOKEN (--token-file wins)
    std::string defaultSocketPath;              // paddock::defaultBrokerSocketPath()
    std::function<bool()> interrupted;          // true once the user pressed Ctrl-C; may be empty
    // Called with true before a follow and false after it: only then does Ctrl-C become a flag
    // (stop following cleanly); elsewhere it keeps its default action and ends paddockctl at once.
    std::function<void(bool)> catchInterrupts;
    // Where an interactive debug-shell reads its command lines, `secrets set` its value and
    // `submit --file -` its sessions; nullptr: this process's stdin (where `secrets set` asks
    // without echo when it is a terminal).
    std::istream *input = nullptr;
    // Whether err is a terminal: `submit --file` then shows its progress there.
    bool errIsTerminal = false;
};

int runInvocation(const Invocation &invocation, const Environment &environment, std::ostream &out,
                  std::ostream &err);

// Parse, then run. Returns the process exit code (cli/exit_codes.h).
int runCli(const std::vector<std::string> &args, const Environment &environment, std::ostream &out,
           std::ostream &err);

} // namespace paddock::cli
