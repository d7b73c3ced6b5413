// The playbook loader (broker/llm/playbook.h): a file a user submits. Any input is parsed or
// refused with a message naming where; a playbook that parses has at least one step.

#include "broker/llm/playbook.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    auto playbook = paddock::llm::parsePlaybook(text, "fuzz.toml");
    if (playbook && playbook->steps.empty())
        std::abort();   // documented: never empty
    if (!playbook && playbook.error().message.find("fuzz.toml") == std::string::npos)
        std::abort();   // every error names the file it is about
    return 0;
}
