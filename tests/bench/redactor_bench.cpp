// redactor_bench: redacting 1 MiB of command output against 1, 100 and 1000 secrets (each with
// its base64 and hex forms), against the raw mechanisms on the same buffer: copying it, and
// searching it once per secret with std::string_view::find (what a naive redactor does).
#include "broker/secrets/redactor.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double bestMs(int runs, F &&f)
{
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        f();
        best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return best;
}

} // namespace

int main()
{
    using paddock::secrets::Redactor;
    using paddock::secrets::Secret;
    std::mt19937 random(1);
    const char *tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // Output that looks like a build log: printable text and newlines.
    std::string output(1 << 20, ' ');
    for (auto &c : output)
        c = random() % 50 == 0 ? '\n' : static_cast<char>(32 + random() % 95);

    volatile size_t sink = 0;
    const double copyMs = bestMs(20, [&] {
        std::string copy = output;
        sink = sink + copy.size();
    });
    std::printf("1 MiB of output; raw copy %.3f ms\n", copyMs);
    std::printf("%8s %9s %12s %12s %14s %14s\n", "secrets", "patterns", "redact ms", "MB/s", "x raw copy",
                "naive find ms");
    for (int count : {1, 10, 100, 1000}) {
        std::vector<Secret> secrets;
        for (int i = 0; i < count; ++i) {
            std::string value(40, ' ');
            for (auto &c : value)
                c = tokenChars[random() % 62];
            secrets.push_back({"S" + std::to_string(i), value});
        }
        // Ten real occurrences, so the replacement path runs too.
        std::string text = output;
        for (int i = 0; i < 10; ++i)
            text.replace(static_cast<size_t>(i) * 100000, 40, secrets[static_cast<size_t>(i) % secrets.size()].value);
        const Redactor redactor(secrets);
        const double redactMs = bestMs(10, [&] { sink = sink + redactor.redact(text).size(); });
        const double naiveMs = bestMs(3, [&] {
            for (const auto &secret : secrets) {
                for (size_t at = std::string_view(text).find(secret.value); at != std::string_view::npos;
                     at = std::string_view(text).find(secret.value, at + 1))
                    sink = sink + at;
            }
        });
        std::printf("%8d %9zu %12.3f %12.1f %14.1f %14.3f\n", count, redactor.patternCount(), redactMs,
                    1.048576 / (redactMs / 1000), redactMs / copyMs, naiveMs);
    }
    return 0;
}
