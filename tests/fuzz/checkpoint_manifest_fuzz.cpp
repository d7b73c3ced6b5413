// What a pool sends about a workspace (checkpoint/manifest.h): a manifest or a delta, from a host
// that may be hostile. For any input the parsers return without crashing, and what they accept
// holds the promises a restore relies on: every path relative with no "." or ".." component, every
// entry's parent a directory of the manifest, chunk lists that add up to the sizes, no set-id bits;
// a parsed manifest reads back to the same entries; a delta applied to it keeps those promises.

#include "checkpoint/manifest.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

using namespace paddock::checkpoint;

namespace {

void checkPromises(const Manifest &manifest)
{
    std::set<std::string> dirs;
    for (const auto &e : manifest.entries) {
        if (!pathProblem(e.path).empty() || (e.mode & ~kModeMask) != 0)
            __builtin_trap();
        const auto slash = e.path.rfind('/');
        if (slash != std::string::npos && !dirs.contains(e.path.substr(0, slash)))
            __builtin_trap();
        if (e.type == EntryType::File && static_cast<int64_t>(e.chunks.size()) != chunkCount(e.size))
            __builtin_trap();
        if (e.type == EntryType::Dir)
            dirs.insert(e.path);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    if (auto manifest = Manifest::parse(text)) {
        checkPromises(*manifest);
        auto again = Manifest::parse(manifest->toJson());
        if (!again || again->entries != manifest->entries)
            __builtin_trap();
        // The same bytes read as a delta of itself onto the manifest.
        Delta delta;
        delta.changed = manifest->entries;
        if (auto applied = apply(*manifest, delta))
            checkPromises(*applied);
    }
    if (auto delta = Delta::parse(text)) {
        if (auto applied = apply(Manifest{}, *delta))
            checkPromises(*applied);
    }
    return 0;
}
