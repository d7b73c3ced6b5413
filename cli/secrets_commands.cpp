#include "cli/secrets_commands.h"

#include "cli/exit_codes.h"

#include <iterator>
#include <termios.h>
#include <unistd.h>

namespace paddock::cli {

namespace {

// Reads one line from the terminal without echoing it.
std::string readHidden(std::istream &in, std::ostream &err, const std::string &name)
{
    err << "value of secret " << name << " (not shown; end with Enter): " << std::flush;
    termios saved {};
    const bool canHide = ::tcgetattr(STDIN_FILENO, &saved) == 0;
    if (canHide) {
        termios hidden = saved;
        hidden.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        ::tcsetattr(STDIN_FILENO, TCSANOW, &hidden);
    }
    std::string line;
    std::getline(in, line);
    if (canHide)
        ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    err << "\n";
    return line;
}

} // namespace

std::string secretValueFromInput(std::string input)
{
    if (input.ends_with("\r\n"))
        input.resize(input.size() - 2);
    else if (input.ends_with("\n"))
        input.resize(input.size() - 1);
    return input;
}

SecretsSubcommands addSecretsCommands(CLI::App &app, Invocation &inv)
{
    auto *secrets = app.add_subcommand("secrets", "Manage the broker's named secrets (values are never shown)");
    secrets->require_subcommand(1);
    SecretsSubcommands commands;
    commands.set = secrets->add_subcommand(
        "set", "Set a secret; the value is read from stdin (one trailing newline is dropped), e.g. "
               "`paddockctl secrets set GITHUB_TOKEN < token.txt`");
    commands.set->add_option("NAME", inv.secretName, "Secret name, an environment variable name (e.g. GITHUB_TOKEN)")
        ->required();
    commands.list = secrets->add_subcommand("ls", "List the secrets: names and fingerprints, never values");
    commands.remove = secrets->add_subcommand("rm", "Remove a secret");
    commands.remove->add_option("NAME", inv.secretName, "Secret name")->required();
    return commands;
}

std::optional<Command> parsedSecretsCommand(const SecretsSubcommands &commands)
{
    if (commands.set && commands.set->parsed())
        return Command::SecretsSet;
    if (commands.list && commands.list->parsed())
        return Command::SecretsList;
    if (commands.remove && commands.remove->parsed())
        return Command::SecretsRemove;
    return std::nullopt;
}

int runSecretsCommand(const Invocation &inv, const BrokerCall &call, std::istream &in, bool inIsTerminal,
                      std::ostream &out, std::ostream &err)
{
    const std::string &name = inv.secretName;
    if (inv.command == Command::SecretsSet) {
        const std::string action = "cannot set secret " + name;
        std::string value;
        if (inIsTerminal)
            value = readHidden(in, err, name);
        else
            value = secretValueFromInput(std::string(std::istreambuf_iterator<char>(in), {}));
        if (in.bad()) {
            err << "paddockctl: " << action << ": cannot read the value from stdin\n";
            return toInt(ExitCode::Error);
        }
        v1::SetSecretRequest request;
        request.set_name(name);
        request.set_value(value);
        v1::SetSecretResponse response;
        const grpc::Status status = call.unary(&AccessStub::SetSecret, request, response);
        if (!status.ok())
            return call.fail(err, action, status,
                          "give the value on stdin: `paddockctl secrets set " + name + " < FILE`");
        if (inv.output == OutputFormat::Json) {
            out << nlohmann::json{{"name", response.secret().name()},
                                  {"fingerprint", response.secret().fingerprint()},
                                  {"replaced", response.replaced()}}
                       .dump(2)
                << "\n";
        } else {
            out << "secret " << response.secret().name() << (response.replaced() ? " replaced" : " set") << " ("
                << response.secret().fingerprint() << ")\n";
        }
        return toInt(ExitCode::Ok);
    }
    if (inv.command == Command::SecretsRemove) {
        v1::DeleteSecretRequest request;
        request.set_name(name);
        v1::DeleteSecretResponse response;
        const grpc::Status status = call.unary(&AccessStub::DeleteSecret, request, response);
        if (!status.ok())
            return call.fail(err, "cannot remove secret " + name, status,
                          "`paddockctl secrets ls` lists the secrets");
        if (inv.output == OutputFormat::Json)
            out << nlohmann::json{{"name", name}, {"removed", true}}.dump(2) << "\n";
        else
            out << "secret " << name << " removed\n";
        return toInt(ExitCode::Ok);
    }

    v1::ListSecretsResponse response;
    const grpc::Status status = call.unary(&AccessStub::ListSecrets, v1::ListSecretsRequest{}, response);
    if (!status.ok())
        return call.fail(err, "cannot list secrets", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &secret : response.secrets())
            list.push_back({{"name", secret.name()}, {"fingerprint", secret.fingerprint()}});
        out << nlohmann::json{{"file", response.file()}, {"secrets", list}}.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &secret : response.secrets())
        rows.push_back({secret.name(), secret.fingerprint()});
    if (rows.empty())
        out << "no secrets (kept in " << response.file() << "; add one with `paddockctl secrets set NAME < FILE`)\n";
    else
        out << renderTable({"NAME", "FINGERPRINT"}, rows);
    return toInt(ExitCode::Ok);
}

} // namespace paddock::cli
