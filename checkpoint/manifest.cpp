#include "checkpoint/manifest.h"

#include "checkpoint/sha256.h"
#include "common/json_fields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>
#include <map>
#include <optional>
#include <set>

namespace paddock::checkpoint {

namespace {

using nlohmann::json;

constexpr const char *kManifestFormat = "paddock.manifest.v1";
constexpr const char *kDeltaFormat = "paddock.delta.v1";

json entryJson(const Entry &e)
{
    json out{{"path", e.path}, {"type", entryTypeName(e.type)}, {"mode", e.mode}, {"uid", e.uid},
             {"gid", e.gid}, {"mtime_ms", e.mtimeMs}};
    if (e.type == EntryType::File) {
        out["size"] = e.size;
        out["chunks"] = e.chunks;
    } else if (e.type == EntryType::Symlink) {
        out["target"] = e.target;
    }
    return out;
}

Result<Entry> parseEntry(const json &j)
{
    if (!j.is_object())
        return fail(ErrorCode::InvalidArgument, "an entry is not an object");
    Entry e;
    try {
        e.path = j.at("path").get<std::string>();
        const std::string type = j.at("type").get<std::string>();
        if (type == "file")
            e.type = EntryType::File;
        else if (type == "dir")
            e.type = EntryType::Dir;
        else if (type == "symlink")
            e.type = EntryType::Symlink;
        else
            return fail(ErrorCode::InvalidArgument, "entry '" + e.path + "' has an unknown type '" + type + "'");
        e.mode = integerField<uint32_t>(j, "mode") & kModeMask;
        e.uid = integerField<uint32_t>(j, "uid", 0u);
        e.gid = integerField<uint32_t>(j, "gid", 0u);
        e.mtimeMs = integerField<int64_t>(j, "mtime_ms", int64_t{0});
        if (e.type == EntryType::File) {
            e.size = integerField<int64_t>(j, "size");
            e.chunks = j.at("chunks").get<std::vector<std::string>>();
        } else if (e.type == EntryType::Symlink) {
            e.target = j.at("target").get<std::string>();
        }
    } catch (const std::exception &ex) { // json's type errors and integerField's range errors
        return fail(ErrorCode::InvalidArgument, std::string("an entry is malformed: ") + ex.what());
    }
    if (std::string problem = pathProblem(e.path); !problem.empty())
        return fail(ErrorCode::InvalidArgument, "entry path '" + e.path + "': " + problem);
    if (e.type == EntryType::File) {
        if (e.size < 0 || static_cast<int64_t>(e.chunks.size()) != chunkCount(e.size))
            return fail(ErrorCode::InvalidArgument, "file '" + e.path + "' has " + std::to_string(e.chunks.size())
                                                        + " chunks for " + std::to_string(e.size) + " bytes");
        for (const auto &hash : e.chunks)
            if (!isSha256Hex(hash))
                return fail(ErrorCode::InvalidArgument, "file '" + e.path + "' names a chunk that is not SHA-256 hex");
    }
    if (e.type == EntryType::Symlink && (e.target.empty() || e.target.size() > kMaxPathBytes
                                         || e.target.find('\0') != std::string::npos))
        return fail(ErrorCode::InvalidArgument, "symlink '" + e.path + "' has an empty or oversized target");
    return e;
}

Result<std::vector<Entry>> parseEntries(const json &list)
{
    if (!list.is_array())
        return fail(ErrorCode::InvalidArgument, "entries are not a list");
    if (list.size() > kMaxEntries)
        return fail(ErrorCode::InvalidArgument, "more than " + std::to_string(kMaxEntries) + " entries");
    std::vector<Entry> entries;
    entries.reserve(list.size());
    for (const auto &item : list) {
        auto e = parseEntry(item);
        if (!e)
            return std::unexpected(e.error());
        entries.push_back(std::move(*e));
    }
    return entries;
}

// j[key] when it is a string, "" when it is missing, nullopt when it is anything else (json's
// value() would throw for a hostile pool's {"format": [...]}).
std::optional<std::string> stringField(const json &j, const char *key)
{
    const auto it = j.find(key);
    if (it == j.end())
        return std::string();
    if (!it->is_string())
        return std::nullopt;
    return it->get<std::string>();
}

Result<json> parseObject(std::string_view text, const char *format, const char *what)
{
    json j = json::parse(text, nullptr, false);
    if (!j.is_object())
        return fail(ErrorCode::InvalidArgument, std::string(what) + " is not a JSON object");
    if (stringField(j, "format") != format)
        return fail(ErrorCode::InvalidArgument, std::string(what) + " is not of format " + format);
    return j;
}

std::string parentOf(const std::string &path)
{
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

} // namespace

const char *entryTypeName(EntryType type)
{
    switch (type) {
    case EntryType::File: return "file";
    case EntryType::Dir: return "dir";
    case EntryType::Symlink: return "symlink";
    }
    return "file";
}

std::string pathProblem(std::string_view path)
{
    if (path.empty())
        return "is empty";
    if (path.size() > kMaxPathBytes)
        return "is longer than " + std::to_string(kMaxPathBytes) + " bytes";
    if (path.find('\0') != std::string_view::npos)
        return "holds a NUL byte";
    if (path.front() == '/')
        return "is absolute";
    size_t start = 0;
    while (start <= path.size()) {
        const size_t end = std::min(path.find('/', start), path.size());
        const std::string_view part = path.substr(start, end - start);
        if (part.empty())
            return "has an empty component";
        if (part == "." || part == "..")
            return "has a '" + std::string(part) + "' component";
        if (part.size() > 255)
            return "has a component longer than 255 bytes";
        start = end + 1;
    }
    return {};
}

Status Manifest::normalise()
{
    std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) { return a.path < b.path; });
    std::map<std::string, EntryType, std::less<>> seen;
    for (auto &e : entries) {
        e.mode &= kModeMask;
        if (std::string problem = pathProblem(e.path); !problem.empty())
            return fail(ErrorCode::InvalidArgument, "entry path '" + e.path + "': " + problem);
        if (seen.contains(e.path))
            return fail(ErrorCode::InvalidArgument, "entry '" + e.path + "' is listed twice");
        // Parents sort before their children (a prefix sorts first), so the parent is seen already.
        const std::string parent = parentOf(e.path);
        if (!parent.empty()) {
            auto it = seen.find(parent);
            if (it == seen.end() || it->second != EntryType::Dir)
                return fail(ErrorCode::InvalidArgument,
                            "entry '" + e.path + "' is under '" + parent + "', which is not a directory of the manifest");
        }
        seen.emplace(e.path, e.type);
    }
    return {};
}

std::string Manifest::toJson() const
{
    json list = json::array();
    for (const auto &e : entries)
        list.push_back(entryJson(e));
    return json{{"format", kManifestFormat}, {"entries", std::move(list)}}.dump();
}

std::string Manifest::id() const
{
    return sha256Hex(toJson());
}

int64_t Manifest::fileBytes() const
{
    int64_t total = 0;
    for (const auto &e : entries)
        total += e.type == EntryType::File ? e.size : 0;
    return total;
}

std::vector<std::string> Manifest::chunkHashes() const
{
    std::set<std::string> hashes;
    for (const auto &e : entries)
        hashes.insert(e.chunks.begin(), e.chunks.end());
    return {hashes.begin(), hashes.end()};
}

Result<Manifest> Manifest::parse(std::string_view text)
{
    auto j = parseObject(text, kManifestFormat, "the manifest");
    if (!j)
        return std::unexpected(j.error());
    auto entries = parseEntries((*j)["entries"]);
    if (!entries)
        return std::unexpected(entries.error());
    Manifest manifest{std::move(*entries)};
    if (auto ok = manifest.normalise(); !ok)
        return std::unexpected(ok.error());
    return manifest;
}

std::string Delta::toJson() const
{
    json list = json::array();
    for (const auto &e : changed)
        list.push_back(entryJson(e));
    return json{{"format", kDeltaFormat}, {"base", base}, {"changed", std::move(list)}, {"removed", removed}}.dump();
}

Result<Delta> Delta::parse(std::string_view text)
{
    auto j = parseObject(text, kDeltaFormat, "the delta");
    if (!j)
        return std::unexpected(j.error());
    Delta delta;
    const auto base = stringField(*j, "base");
    if (!base)
        return fail(ErrorCode::InvalidArgument, "the delta's base is not a manifest id");
    delta.base = *base;
    if (!delta.base.empty() && !isSha256Hex(delta.base))
        return fail(ErrorCode::InvalidArgument, "the delta's base is not a manifest id");
    auto changed = parseEntries((*j)["changed"]);
    if (!changed)
        return std::unexpected(changed.error());
    delta.changed = std::move(*changed);
    const json &removed = (*j)["removed"];
    if (!removed.is_array() || removed.size() > kMaxEntries)
        return fail(ErrorCode::InvalidArgument, "the delta's removed paths are not a list");
    for (const auto &path : removed) {
        if (!path.is_string())
            return fail(ErrorCode::InvalidArgument, "a removed path is not a string");
        std::string p = path.get<std::string>();
        if (std::string problem = pathProblem(p); !problem.empty())
            return fail(ErrorCode::InvalidArgument, "removed path '" + p + "': " + problem);
        delta.removed.push_back(std::move(p));
    }
    return delta;
}

Result<Manifest> apply(const Manifest &base, const Delta &delta)
{
    std::map<std::string, Entry, std::less<>> byPath;
    for (const auto &e : base.entries)
        byPath.emplace(e.path, e);
    for (const auto &path : delta.removed) {
        // The path and everything under it.
        auto it = byPath.lower_bound(path);
        while (it != byPath.end() && (it->first == path || it->first.starts_with(path + "/")))
            it = byPath.erase(it);
    }
    for (const auto &e : delta.changed)
        byPath.insert_or_assign(e.path, e);
    Manifest out;
    out.entries.reserve(byPath.size());
    for (auto &[path, e] : byPath)
        out.entries.push_back(std::move(e));
    if (out.entries.size() > kMaxEntries)
        return fail(ErrorCode::InvalidArgument, "the checkpoint has more than " + std::to_string(kMaxEntries) + " entries");
    if (auto ok = out.normalise(); !ok)
        return std::unexpected(ok.error());
    return out;
}

Delta diff(const Manifest &from, const Manifest &to)
{
    Delta delta;
    auto a = from.entries.begin();
    auto b = to.entries.begin();
    while (a != from.entries.end() || b != to.entries.end()) {
        if (b == to.entries.end() || (a != from.entries.end() && a->path < b->path)) {
            delta.removed.push_back(a->path);
            ++a;
        } else if (a == from.entries.end() || b->path < a->path) {
            delta.changed.push_back(*b);
            ++b;
        } else {
            if (!(*a == *b))
                delta.changed.push_back(*b);
            ++a;
            ++b;
        }
    }
    return delta;
}

} // namespace paddock::checkpoint
