// paddockctl: every broker call from a shell. The logic lives in paddock_cli (cli/app.h).
#include "cli/app.h"
#include "common/paths.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <unistd.h>

namespace {

std::atomic<bool> g_interrupted{false};

// Signal handlers only set a flag; the follow loop turns it into a clean cancel of the stream.
void onInterrupt(int) { g_interrupted.store(true); }

void catchInterrupts(bool on)
{
    struct sigaction action {};
    action.sa_handler = on ? onInterrupt : SIG_DFL;
    sigemptyset(&action.sa_mask);
    // One Ctrl-C stops following cleanly; a second one (default action again) kills at once.
    action.sa_flags = on ? SA_RESETHAND : 0;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

} // namespace

int main(int argc, char **argv)
{
    paddock::cli::Environment env;
    if (const char *broker = std::getenv("PADDOCK_BROKER"))
        env.brokerAddress = broker;
    if (const char *token = std::getenv("PADDOCK_TOKEN"))
        env.token = token;
    env.defaultSocketPath = paddock::defaultBrokerSocketPath().string();
    env.interrupted = [] { return g_interrupted.load(); };
    env.catchInterrupts = catchInterrupts;
    env.errIsTerminal = ::isatty(STDERR_FILENO) == 1;

    const std::vector<std::string> args(argv + 1, argv + argc);
    const int code = paddock::cli::runCli(args, env, std::cout, std::cerr);
    std::cout.flush();
    return code;
}
