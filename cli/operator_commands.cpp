#include "cli/operator_commands.h"

#include "cli/exit_codes.h"
#include "cli/format.h"
#include "common/clock.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <pwd.h>
#include <sstream>
#include <unistd.h>

namespace paddock::cli {
namespace {

using nlohmann::json;

// Output is bytes; JSON wants UTF-8: invalid sequences become U+FFFD.
std::string text(const std::string &bytes)
{
    return json(bytes).dump(-1, ' ', false, json::error_handler_t::replace);
}

json textJson(const std::string &bytes)
{
    return json::parse(text(bytes));
}

std::string mib(int64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return buf;
}

std::string size(int64_t bytes)
{
    if (bytes < 10 * 1024)
        return std::to_string(bytes);
    if (bytes < 10 * (1 << 20))
        return std::to_string(bytes / 1024) + "K";
    return std::to_string(bytes >> 20) + "M";
}

std::string modeString(const v1::SnapshotFile &f)
{
    std::string s = f.is_dir() ? "d" : f.is_symlink() ? "l" : "-";
    const char *rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; ++i)
        s += (f.mode() >> (8 - i)) & 1 ? rwx[i] : '-';
    return s;
}

std::string userName()
{
    if (const passwd *pw = ::getpwuid(::geteuid()))
        return pw->pw_name;
    return std::to_string(::geteuid());
}

// The tail of text: its last maxLines lines.
std::string lastLines(const std::string &s, size_t maxLines)
{
    size_t lines = 0;
    size_t at = s.size();
    if (at > 0 && s[at - 1] == '\n')
        --at;
    while (at > 0) {
        if (s[at - 1] == '\n' && ++lines == maxLines)
            break;
        --at;
    }
    return s.substr(at);
}

struct Runner {
    const Invocation &inv;
    const BrokerCall &call;
    std::ostream &out;
    std::ostream &err;

    void prepare(grpc::ClientContext &ctx, bool deadline = true) const
    {
        if (deadline)
            call.setDeadline(ctx);
        ctx.AddMetadata("paddock-user", userName());
    }

    int fail(const std::string &action, const grpc::Status &status, std::string_view hint = {}) const
    {
        return call.fail(err, action, status, hint);
    }

    // ID is SANDBOX or POOL/SANDBOX; without the pool, the post-mortem list says which pool has it.
    std::optional<v1::PostMortem> find(const std::string &id, int *exitCode) const
    {
        std::string pool = inv.pool, sandbox = id;
        if (auto slash = id.find('/'); slash != std::string::npos) {
            pool = id.substr(0, slash);
            sandbox = id.substr(slash + 1);
        }
        if (pool.empty()) {
            v1::ListPoolPostMortemsRequest req;
            req.set_page_size(1000);
            v1::ListPoolPostMortemsResponse resp;
            grpc::ClientContext ctx;
            prepare(ctx);
            if (auto st = call.stubs.operations->ListPostMortems(&ctx, req, &resp); !st.ok()) {
                *exitCode = fail("cannot find post-mortem " + id, st);
                return std::nullopt;
            }
            std::vector<std::string> pools;
            for (const auto &pm : resp.post_mortems())
                if (pm.sandbox_id() == sandbox)
                    pools.push_back(pm.pool());
            if (pools.empty()) {
                std::string note;
                for (const auto &e : resp.pool_errors())
                    note += "; pool '" + e.pool() + "' did not answer: " + e.error();
                err << "paddockctl: no post-mortem of sandbox '" << sandbox << "' on any pool" << note
                    << "; `paddockctl postmortems ls` lists the kept ones\n";
                *exitCode = toInt(ExitCode::NotFound);
                return std::nullopt;
            }
            if (pools.size() > 1) {
                err << "paddockctl: several pools kept a post-mortem of '" << sandbox << "'; name one as POOL/"
                    << sandbox << " (pools: ";
                for (size_t i = 0; i < pools.size(); ++i)
                    err << (i ? ", " : "") << pools[i];
                err << ")\n";
                *exitCode = toInt(ExitCode::Usage);
                return std::nullopt;
            }
            pool = pools.front();
        }
        v1::GetPoolPostMortemRequest req;
        req.set_pool(pool);
        req.set_sandbox_id(sandbox);
        v1::PostMortem pm;
        grpc::ClientContext ctx;
        prepare(ctx);
        if (auto st = call.stubs.operations->GetPostMortem(&ctx, req, &pm); !st.ok()) {
            *exitCode = fail("cannot read post-mortem " + id, st,
                             st.error_code() == grpc::StatusCode::NOT_FOUND ? "`paddockctl postmortems ls` lists the kept ones"
                                                                            : "");
            return std::nullopt;
        }
        if (pm.pool().empty())
            pm.set_pool(pool);
        return pm;
    }

    int list() const
    {
        v1::ListPoolPostMortemsRequest req;
        req.set_session_id(inv.sessionFilter);
        req.set_pool(inv.pool);
        if (inv.limit > 0)
            req.set_page_size(inv.limit);
        v1::ListPoolPostMortemsResponse resp;
        grpc::ClientContext ctx;
        prepare(ctx);
        if (auto st = call.stubs.operations->ListPostMortems(&ctx, req, &resp); !st.ok())
            return fail("cannot list post-mortems", st);
        if (inv.output == OutputFormat::Json) {
            json j = {{"post_mortems", json::array()}, {"pool_errors", json::array()}};
            for (const auto &pm : resp.post_mortems())
                j["post_mortems"].push_back(postMortemToJson(pm, false));
            for (const auto &e : resp.pool_errors())
                j["pool_errors"].push_back({{"pool", e.pool()}, {"error", e.error()}});
            out << j.dump(2) << "\n";
        } else {
            std::vector<std::vector<std::string>> rows;
            const int64_t now = nowUnixMs();
            for (const auto &pm : resp.post_mortems()) {
                const std::string exit = pm.signal() ? "signal " + std::to_string(pm.signal()) : std::to_string(pm.exit_code());
                rows.push_back({pm.pool() + "/" + pm.sandbox_id(), pm.session_id(), pm.tier(), pm.reason(), exit,
                                formatAge(pm.time_unix_ms(), now), truncateText(pm.detail(), 60)});
            }
            out << renderTable({"ID", "SESSION", "TIER", "REASON", "EXIT", "AGE", "DETAIL"}, rows);
            for (const auto &e : resp.pool_errors())
                err << "pool '" << e.pool() << "' did not answer: " << e.error() << "\n";
        }
        return toInt(ExitCode::Ok);
    }

    int show() const
    {
        int code = 0;
        auto pm = find(inv.postMortemId, &code);
        if (!pm)
            return code;
        if (inv.output == OutputFormat::Json)
            out << postMortemToJson(*pm, true).dump(2) << "\n";
        else
            out << formatPostMortem(*pm, nowUnixMs());
        return toInt(ExitCode::Ok);
    }

    int listFiles(const std::string &pool, const std::string &ref, const std::string &what) const
    {
        v1::ListPoolSnapshotFilesRequest req;
        req.set_pool(pool);
        req.set_snapshot_ref(ref);
        req.set_path_prefix(inv.path);
        v1::ListSnapshotFilesResponse resp;
        grpc::ClientContext ctx;
        prepare(ctx);
        if (auto st = call.stubs.operations->ListSnapshotFiles(&ctx, req, &resp); !st.ok())
            return fail("cannot list the files of " + what, st);
        if (inv.output == OutputFormat::Json) {
            json list = json::array();
            for (const auto &f : resp.files()) {
                json e{{"path", textJson(f.path())}, {"is_dir", f.is_dir()}, {"size", f.size()}, {"mode", f.mode()},
                       {"mtime_unix_ms", f.mtime_unix_ms()}};
                if (f.is_symlink())
                    e["symlink_target"] = textJson(f.symlink_target());
                list.push_back(std::move(e));
            }
            out << list.dump(2) << "\n";
        } else {
            std::vector<std::vector<std::string>> rows;
            for (const auto &f : resp.files())
                rows.push_back({modeString(f), f.is_dir() ? "" : size(f.size()), formatIsoTime(f.mtime_unix_ms()).substr(0, 19),
                                f.path() + (f.is_dir() ? "/" : "") + (f.is_symlink() ? " -> " + f.symlink_target() : "")});
            out << renderTable({"MODE", "SIZE", "MODIFIED", "PATH"}, rows, {1});
        }
        return toInt(ExitCode::Ok);
    }

    int files() const
    {
        int code = 0;
        auto pm = find(inv.postMortemId, &code);
        if (!pm)
            return code;
        if (pm->snapshot_ref().empty()) {
            err << "paddockctl: the post-mortem of " << pm->sandbox_id() << " has no snapshot ("
                << (pm->snapshot_error().empty() ? "none was taken" : pm->snapshot_error()) << ")\n";
            return toInt(ExitCode::Conflict);
        }
        return listFiles(pm->pool(), pm->snapshot_ref(), "snapshot " + pm->snapshot_ref());
    }

    // cat and download: stream the file into sink.
    int read(const std::function<bool(const std::string &)> &sink, int64_t *total) const
    {
        int code = 0;
        auto pm = find(inv.postMortemId, &code);
        if (!pm)
            return code;
        if (pm->snapshot_ref().empty()) {
            err << "paddockctl: the post-mortem of " << pm->sandbox_id() << " has no snapshot to read from\n";
            return toInt(ExitCode::Conflict);
        }
        v1::ReadPoolSnapshotFileRequest req;
        req.set_pool(pm->pool());
        req.set_snapshot_ref(pm->snapshot_ref());
        req.set_path(inv.path);
        grpc::ClientContext ctx;
        prepare(ctx, false);   // a large download may take longer than --timeout
        auto reader = call.stubs.operations->ReadSnapshotFile(&ctx, req);
        v1::FileChunk chunk;
        *total = 0;
        while (reader->Read(&chunk)) {
            if (!sink(chunk.data())) {
                ctx.TryCancel();
                reader->Finish();
                err << "paddockctl: cannot write " << inv.outputFile << "\n";
                return toInt(ExitCode::Error);
            }
            *total += static_cast<int64_t>(chunk.data().size());
        }
        if (auto st = reader->Finish(); !st.ok())
            return fail("cannot read " + inv.path + " from snapshot " + pm->snapshot_ref(), st,
                        st.error_code() == grpc::StatusCode::NOT_FOUND
                            ? "`paddockctl postmortems files " + inv.postMortemId + "` lists its files"
                            : "");
        return toInt(ExitCode::Ok);
    }

    int cat() const
    {
        int64_t total = 0;
        int code = read([&](const std::string &data) {
            out << data;
            return static_cast<bool>(out);
        }, &total);
        out.flush();
        return code;
    }

    int download() const
    {
        const std::filesystem::path target = inv.outputFile;
        const std::filesystem::path tmp = target.string() + ".part";
        std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
        if (!file) {
            err << "paddockctl: cannot write " << tmp.string() << "; check the directory exists and is writable\n";
            return toInt(ExitCode::Error);
        }
        int64_t total = 0;
        int code = read([&](const std::string &data) {
            file.write(data.data(), static_cast<std::streamsize>(data.size()));
            return static_cast<bool>(file);
        }, &total);
        file.close();
        std::error_code ec;
        if (code != 0 || !file) {
            std::filesystem::remove(tmp, ec);
            return code != 0 ? code : toInt(ExitCode::Error);
        }
        std::filesystem::rename(tmp, target, ec);
        if (ec) {
            err << "paddockctl: cannot rename " << tmp.string() << " to " << target.string() << ": " << ec.message() << "\n";
            return toInt(ExitCode::Error);
        }
        if (inv.output == OutputFormat::Json)
            out << json{{"path", inv.path}, {"file", target.string()}, {"bytes", total}}.dump() << "\n";
        else
            err << "wrote " << total << " bytes to " << target.string() << "\n";
        return toInt(ExitCode::Ok);
    }

    int snapshotList() const { return listFiles(inv.pool, inv.snapshotRef, "snapshot " + inv.snapshotRef); }

    // One command in the shell: output as it comes, then the exit. The result for --output json.
    int runOne(const v1::DebugShell &shell, const std::string &line, json *result) const
    {
        v1::DebugExecRequest req;
        req.set_shell_id(shell.shell_id());
        req.add_argv("/bin/sh");
        req.add_argv("-c");
        req.add_argv(line);
        grpc::ClientContext ctx;
        prepare(ctx, false);
        auto reader = call.stubs.operations->DebugExec(&ctx, req);
        v1::ExecResponse msg;
        std::string stdoutData, stderrData;
        std::optional<v1::ExecExit> exit;
        const bool streaming = inv.output != OutputFormat::Json;
        while (reader->Read(&msg)) {
            stdoutData += msg.stdout();
            stderrData += msg.stderr();
            if (streaming) {
                out << msg.stdout() << std::flush;
                err << msg.stderr() << std::flush;
            }
            if (msg.has_exit())
                exit = msg.exit();
        }
        if (auto st = reader->Finish(); !st.ok())
            return fail("cannot run the command in debug shell " + shell.shell_id(), st);
        const int code = exit ? exit->exit_code() : -1;
        if (result)
            *result = {{"command", line}, {"exit_code", code}, {"signal", exit ? exit->signal() : 0},
                       {"reason", exit ? exit->reason() : ""}, {"stdout", textJson(stdoutData)}, {"stderr", textJson(stderrData)}};
        if (streaming && exit && (code != 0 || exit->signal() != 0))
            err << "[exit " << (exit->signal() ? "signal " + std::to_string(exit->signal()) : std::to_string(code))
                << (exit->reason().empty() ? "" : ", " + exit->reason()) << "]\n";
        return exit && code == 0 && exit->signal() == 0 ? 0 : 1;
    }

    int debugShell(std::istream &in) const
    {
        int code = 0;
        auto pm = find(inv.postMortemId, &code);
        if (!pm)
            return code;
        v1::OpenDebugShellRequest oreq;
        oreq.set_pool(pm->pool());
        oreq.set_sandbox_id(pm->sandbox_id());
        oreq.set_tier(inv.tier);
        v1::DebugShell shell;
        {
            grpc::ClientContext ctx;
            prepare(ctx, false);
            ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));   // claim + restore
            if (auto st = call.stubs.operations->OpenDebugShell(&ctx, oreq, &shell); !st.ok())
                return fail("cannot open a debug shell on " + pm->pool() + "/" + pm->sandbox_id(), st);
        }
        auto close = [&] {
            v1::CloseDebugShellRequest creq;
            creq.set_shell_id(shell.shell_id());
            v1::CloseDebugShellResponse cresp;
            grpc::ClientContext ctx;
            prepare(ctx);
            return call.stubs.operations->CloseDebugShell(&ctx, creq, &cresp);
        };
        if (inv.output != OutputFormat::Json)
            err << "debug shell " << shell.shell_id() << ": sandbox " << shell.sandbox_id() << " (" << shell.tier() << ") on "
                << shell.pool() << ", restored from " << shell.snapshot_ref() << "; every command is recorded in session "
                << shell.session_id() << "'s log\n";
        int result = 0;
        json ran = json::array();
        if (!inv.debugCommand.empty()) {
            json one;
            result = runOne(shell, inv.debugCommand, &one);
            ran.push_back(std::move(one));
        } else {
            const bool terminal = &in == &std::cin && ::isatty(STDIN_FILENO);
            std::string line;
            for (;;) {
                if (terminal)
                    err << "debug:" << shell.sandbox_id() << "$ " << std::flush;
                if (!std::getline(in, line) || (call.interrupted && call.interrupted()))
                    break;
                if (line == "exit" || line == "quit")
                    break;
                if (line.find_first_not_of(" \t") == std::string::npos)
                    continue;
                json one;
                result = runOne(shell, line, &one);
                ran.push_back(std::move(one));
                if (result > 1)
                    break;   // the broker or the shell is gone
            }
        }
        const grpc::Status closed = close();
        if (inv.output == OutputFormat::Json) {
            out << json{{"shell_id", shell.shell_id()}, {"pool", shell.pool()}, {"sandbox_id", shell.sandbox_id()},
                        {"tier", shell.tier()}, {"session_id", shell.session_id()}, {"snapshot_ref", shell.snapshot_ref()},
                        {"commands", ran}}
                       .dump(2)
                << "\n";
        }
        if (!closed.ok() && closed.error_code() != grpc::StatusCode::NOT_FOUND)
            return fail("cannot close debug shell " + shell.shell_id(), closed);
        return result;
    }
};

} // namespace

OperatorSubcommands addOperatorCommands(CLI::App &app, Invocation &inv)
{
    OperatorSubcommands c;
    auto *pm = app.add_subcommand("postmortems", "Post-mortems of failed sandboxes: list, show, browse their snapshot");
    pm->require_subcommand(1);
    c.pmList = pm->add_subcommand("ls", "List the post-mortems every pool keeps, newest first");
    c.pmList->add_option("--session", inv.sessionFilter, "Only this session's");
    c.pmList->add_option("--pool", inv.pool, "Only this pool's");
    c.pmList->add_option("--limit", inv.limit, "At most N per pool (default 100)")->check(CLI::Range(1, 1000));
    const char *idHelp = "The failed sandbox: SANDBOX, or POOL/SANDBOX (as `postmortems ls` shows it)";
    c.pmShow = pm->add_subcommand("show", "Reason, exit, last output, resource samples and processes of one failure");
    c.pmShow->add_option("ID", inv.postMortemId, idHelp)->required();
    c.pmFiles = pm->add_subcommand("files", "List the files of a post-mortem's workspace snapshot");
    c.pmFiles->add_option("ID", inv.postMortemId, idHelp)->required();
    c.pmFiles->add_option("PATH", inv.path, "Only this path and what is under it");
    c.pmCat = pm->add_subcommand("cat", "Print one file of a post-mortem's workspace snapshot");
    c.pmCat->add_option("ID", inv.postMortemId, idHelp)->required();
    c.pmCat->add_option("PATH", inv.path, "The file, as `postmortems files` lists it")->required();
    c.pmDownload = pm->add_subcommand("download", "Save one file of a post-mortem's workspace snapshot");
    c.pmDownload->add_option("ID", inv.postMortemId, idHelp)->required();
    c.pmDownload->add_option("PATH", inv.path, "The file, as `postmortems files` lists it")->required();
    c.pmDownload->add_option("-o,--out", inv.outputFile, "Where to save it")->required();
    for (auto *sub : {c.pmShow, c.pmFiles, c.pmCat, c.pmDownload})
        sub->add_option("--pool", inv.pool, "The pool, when ID does not name it");

    auto *snapshot = app.add_subcommand("snapshot", "Workspace snapshots on a pool");
    snapshot->require_subcommand(1);
    c.snapshotList = snapshot->add_subcommand("ls", "List the files of a snapshot");
    c.snapshotList->add_option("POOL", inv.pool, "The pool that holds it")->required();
    c.snapshotList->add_option("REF", inv.snapshotRef, "The snapshot ref (a post-mortem's snapshot_ref)")->required();
    c.snapshotList->add_option("PATH", inv.path, "Only this path and what is under it");

    c.debugShell = app.add_subcommand(
        "debug-shell", "Open a fresh sandbox restored from a post-mortem's snapshot and run commands in it (each one is "
                       "recorded in the failed session's log); reads command lines from stdin until EOF or `exit`");
    c.debugShell->add_option("ID", inv.postMortemId, idHelp)->required();
    c.debugShell->add_option("--tier", inv.tier, "Tier of the new sandbox (default: the failed sandbox's)");
    c.debugShell->add_option("--pool", inv.pool, "The pool, when ID does not name it");
    c.debugShell->add_option("-c,--command", inv.debugCommand, "Run this one shell line, print its output, close the shell");
    return c;
}

std::optional<Command> parsedOperatorCommand(const OperatorSubcommands &c)
{
    if (c.pmList && c.pmList->parsed())
        return Command::PostMortemsList;
    if (c.pmShow && c.pmShow->parsed())
        return Command::PostMortemsShow;
    if (c.pmFiles && c.pmFiles->parsed())
        return Command::PostMortemsFiles;
    if (c.pmCat && c.pmCat->parsed())
        return Command::PostMortemsCat;
    if (c.pmDownload && c.pmDownload->parsed())
        return Command::PostMortemsDownload;
    if (c.snapshotList && c.snapshotList->parsed())
        return Command::SnapshotList;
    if (c.debugShell && c.debugShell->parsed())
        return Command::DebugShell;
    return std::nullopt;
}

int runOperatorCommand(const Invocation &inv, const BrokerCall &call, std::istream &in, std::ostream &out, std::ostream &err)
{
    const Runner r{inv, call, out, err};
    switch (inv.command) {
    case Command::PostMortemsList: return r.list();
    case Command::PostMortemsShow: return r.show();
    case Command::PostMortemsFiles: return r.files();
    case Command::PostMortemsCat: return r.cat();
    case Command::PostMortemsDownload: return r.download();
    case Command::SnapshotList: return r.snapshotList();
    case Command::DebugShell: return r.debugShell(in);
    default: return toInt(ExitCode::Error);
    }
}

json postMortemToJson(const v1::PostMortem &pm, bool full)
{
    json j{{"pool", pm.pool()}, {"pool_id", pm.pool_id()}, {"sandbox_id", pm.sandbox_id()}, {"session_id", pm.session_id()},
           {"tier", pm.tier()}, {"runtime", pm.runtime()}, {"reason", pm.reason()}, {"detail", textJson(pm.detail())},
           {"exit_code", pm.exit_code()}, {"signal", pm.signal()}, {"duration_ms", pm.duration_ms()},
           {"time_unix_ms", pm.time_unix_ms()}, {"snapshot_ref", pm.snapshot_ref()},
           {"snapshot_size_bytes", pm.snapshot_size_bytes()}, {"peak_memory_bytes", pm.peak_memory_bytes()},
           {"archived", pm.archived()}};
    json argv = json::array();
    for (const auto &a : pm.argv())
        argv.push_back(textJson(a));
    j["argv"] = argv;
    if (!pm.snapshot_error().empty())
        j["snapshot_error"] = pm.snapshot_error();
    j["limits"] = {{"cpu", pm.limits().cpu()}, {"memory_bytes", pm.limits().memory_bytes()}, {"pids", pm.limits().pids()},
                   {"disk_bytes", pm.limits().disk_bytes()}};
    if (!full)
        return j;
    j["last_stdout"] = textJson(pm.last_stdout());
    j["last_stderr"] = textJson(pm.last_stderr());
    j["stdout_bytes"] = pm.stdout_bytes();
    j["stderr_bytes"] = pm.stderr_bytes();
    json samples = json::array();
    for (const auto &s : pm.samples())
        samples.push_back({{"time_unix_ms", s.time_unix_ms()}, {"cpu_cores", s.cpu_cores()}, {"memory_bytes", s.memory_bytes()},
                           {"pids", s.pids()}});
    j["samples"] = samples;
    json procs = json::array();
    for (const auto &p : pm.processes())
        procs.push_back({{"pid", p.pid()}, {"ppid", p.ppid()}, {"state", p.state()}, {"rss_bytes", p.rss_bytes()},
                         {"command", textJson(p.command())}});
    j["processes"] = procs;
    j["processes_note"] = pm.processes_note();
    j["snapshot_ms"] = pm.snapshot_ms();
    return j;
}

std::string formatPostMortem(const v1::PostMortem &pm, int64_t nowUnixMs)
{
    std::ostringstream o;
    std::string cmd;
    for (const auto &a : pm.argv())
        cmd += (cmd.empty() ? "" : " ") + a;
    o << "sandbox:   " << pm.pool() << "/" << pm.sandbox_id() << " (tier " << pm.tier() << ", " << pm.runtime() << ")\n";
    if (pm.archived())
        o << "archived:  the pool did not answer; this is the broker's copy, its workspace the checkpoint below\n";
    o << "session:   " << pm.session_id() << "\n"
      << "reason:    " << pm.reason() << "\n"
      << "exit:      " << (pm.signal() ? "killed by signal " + std::to_string(pm.signal()) : "code " + std::to_string(pm.exit_code()))
      << "\n"
      << "what:      " << pm.detail() << "\n";
    if (!cmd.empty())
        o << "command:   " << truncateText(cmd, 200) << "  (" << static_cast<int64_t>(pm.duration_ms()) << " ms)\n";
    o << "when:      " << formatIsoTime(pm.time_unix_ms()) << " (" << formatAge(pm.time_unix_ms(), nowUnixMs) << " ago)\n"
      << "limits:    cpu " << pm.limits().cpu() << ", memory " << mib(pm.limits().memory_bytes()) << ", pids "
      << pm.limits().pids() << "\n";
    // The samples in short: how long, the memory peak against the limit, the busiest second.
    if (pm.samples_size() > 0) {
        int64_t peak = 0;
        double cpu = 0;
        for (const auto &s : pm.samples()) {
            peak = std::max(peak, s.memory_bytes());
            cpu = std::max(cpu, s.cpu_cores());
        }
        const int64_t span = pm.samples(pm.samples_size() - 1).time_unix_ms() - pm.samples(0).time_unix_ms();
        char line[256];
        std::snprintf(line, sizeof line, "%d over %.0f s; memory peak %s (%.0f%% of the limit), cpu peak %.2f cores",
                      pm.samples_size(), static_cast<double>(span) / 1000.0, mib(peak).c_str(),
                      pm.limits().memory_bytes() > 0 ? 100.0 * static_cast<double>(peak) / static_cast<double>(pm.limits().memory_bytes()) : 0.0,
                      cpu);
        o << "samples:   " << line << "\n";
        o << "memory:    ";
        const int from = std::max(0, pm.samples_size() - 12);
        for (int i = from; i < pm.samples_size(); ++i)
            o << (i > from ? " " : "") << mib(pm.samples(i).memory_bytes());
        o << (from > 0 ? "  (last 12)" : "") << "\n";
    } else {
        o << "samples:   none (the pool takes one a second while a sandbox is claimed)\n";
    }
    if (!pm.snapshot_ref().empty())
        o << "snapshot:  " << pm.snapshot_ref() << " (" << size(pm.snapshot_size_bytes()) << " bytes)  `paddockctl postmortems files "
          << pm.pool() << "/" << pm.sandbox_id() << "`\n";
    else
        o << "snapshot:  none (" << pm.snapshot_error() << ")\n";
    o << "\nprocesses (" << pm.processes_note() << "):\n";
    if (pm.processes_size() == 0) {
        o << "  (none)\n";
    } else {
        std::vector<std::vector<std::string>> rows;
        for (const auto &p : pm.processes())
            rows.push_back({std::to_string(p.pid()), std::to_string(p.ppid()), p.state(), size(p.rss_bytes()),
                            truncateText(p.command(), 100)});
        std::istringstream table(renderTable({"PID", "PPID", "S", "RSS", "COMMAND"}, rows, {0, 1, 3}));
        for (std::string l; std::getline(table, l);)
            o << "  " << l << "\n";
    }
    auto tail = [&](const char *name, const std::string &data, int64_t total) {
        o << "\nlast " << name;
        if (total > static_cast<int64_t>(data.size()))
            o << " (the last " << data.size() << " of " << total << " bytes)";
        o << ":\n";
        if (data.empty()) {
            o << "  (empty)\n";
            return;
        }
        std::istringstream lines(lastLines(json::parse(text(data)).get<std::string>(), 20));
        for (std::string l; std::getline(lines, l);)
            o << "  " << l << "\n";
    };
    tail("stdout", pm.last_stdout(), pm.stdout_bytes());
    tail("stderr", pm.last_stderr(), pm.stderr_bytes());
    return o.str();
}

} // namespace paddock::cli
