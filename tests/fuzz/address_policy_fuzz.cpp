// The egress address policy (common/address_policy.h): allowlist entries from pool.toml and
// approved grants, and IP literals in every spelling the resolver accepts. Parsing must never
// crash; an entry that parses must be one the policy can match against.

#include "common/address_policy.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    (void)paddock::pool::egress::parseIpLiteral(text);
    if (auto list = paddock::pool::egress::Allowlist::parse({text}))
        (void)list->empty();
    (void)paddock::pool::egress::Grant::parse(text, "r-fuzz");
    return 0;
}
