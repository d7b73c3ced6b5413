#include "broker/checkpoints/checkpoint_references.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <string_view>

namespace paddock::checkpoints {

namespace {

using nlohmann::json;

constexpr int kSessionPage = 200;
constexpr int kEventPage = 500;

// The event kinds whose payload may name a manifest (docs/events.md).
constexpr std::array kNamingKinds = {std::string_view(core::kind::Checkpoint),
                                     std::string_view(core::kind::SandboxReleased),
                                     std::string_view(core::kind::SandboxMoved),
                                     std::string_view(core::kind::SandboxRestored)};

std::unexpected<Error> stopped()
{
    return std::unexpected(Error{ErrorCode::Unavailable, "the broker is stopping; the collection ends unfinished"});
}

// A session whose sandbox is still held has not finished with its workspace, whatever its status.
bool isLive(const core::SessionState &session)
{
    return !core::isTerminal(session.status) || !session.sandboxId.empty();
}

// The events one session appended since `known` was read, a page at a time, into known.
Status readNewManifests(store::EventStore &events, const core::SessionState &session,
                        const std::atomic<bool> &stopping, SessionManifests &known)
{
    while (known.readToSeq < session.lastSeq) {
        if (stopping.load())
            return stopped();
        auto page = events.readEvents(session.id, known.readToSeq + 1, kEventPage);
        if (!page)
            return fail(page.error().code, "cannot read the log of session " + session.id
                                               + " to see which checkpoints it uses: " + page.error().message);
        if (page->empty())
            return {};
        for (const auto &event : *page)
            if (std::string id = manifestNamedBy(event); !id.empty())
                known.manifests.push_back(std::move(id));
        known.readToSeq = page->back().seq;
    }
    return {};
}

} // namespace

std::string manifestNamedBy(const core::Event &event)
{
    if (std::find(kNamingKinds.begin(), kNamingKinds.end(), event.kind) == kNamingKinds.end()
        || event.payload.find("\"manifest\"") == std::string::npos)
        return {};
    const json payload = json::parse(event.payload, nullptr, false);
    if (!payload.is_object() || !payload.contains("manifest") || !payload["manifest"].is_string())
        return {};
    return payload["manifest"].get<std::string>();
}

Result<References> sessionReferences(store::EventStore &events, int64_t nowUnixMs, int64_t retentionMs,
                                     const std::atomic<bool> &stopping, ReferenceCache &cache)
{
    References references;
    ReferenceCache kept;
    store::SessionQuery query;
    query.pageSize = kSessionPage;
    do {
        if (stopping.load())
            return stopped();
        auto page = events.listSessions(query);
        if (!page)
            return fail(page.error().code, "cannot list the sessions to see which checkpoints they use: "
                                               + page.error().message);
        for (const auto &session : page->sessions) {
            const bool live = isLive(session);
            const bool retained = !live && (retentionMs == 0 || session.updatedUnixMs >= nowUnixMs - retentionMs);
            if (!live && !retained) {
                references.expiredSessions++;
                continue;
            }
            (live ? references.liveSessions : references.retainedSessions)++;
            // Taken out of the cache: a walk that fails half-way leaves no entry claiming events read.
            SessionManifests known;
            if (auto node = cache.extract(session.id); !node.empty())
                known = std::move(node.mapped());
            if (auto read = readNewManifests(events, session, stopping, known); !read)
                return std::unexpected(read.error());
            references.manifests.insert(known.manifests.begin(), known.manifests.end());
            if (!session.checkpoint.empty())
                references.manifests.insert(session.checkpoint);
            kept.emplace(session.id, std::move(known));
        }
        query.pageToken = page->nextPageToken;
    } while (!query.pageToken.empty());
    cache = std::move(kept);
    return references;
}

// The manifest an archived post-mortem names; "" for none.
Result<std::string> postMortemManifest(BlobStore &blobs, const BlobInfo &blob)
{
    auto bytes = blobs.get(blob.key);
    if (!bytes && bytes.error().code == ErrorCode::NotFound)
        return std::string();   // deleted since the listing: it names nothing any more
    if (!bytes)
        return fail(bytes.error().code, "cannot read the archived post-mortem " + blob.key
                                            + ", which may name a checkpoint: " + bytes.error().message);
    const json postMortem = json::parse(*bytes, nullptr, false);
    if (!postMortem.is_object())
        return fail(ErrorCode::DataLoss, "the archived post-mortem " + blob.key + " in " + blobs.describe()
                                             + " is not a JSON object, so the checkpoint it names is unknown; "
                                               "delete it if it is not needed");
    const auto it = postMortem.find("manifest");
    return it != postMortem.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status addPostMortemReferences(BlobStore &blobs, References &references, PostMortemCache &cache)
{
    auto listed = blobs.list(kPostMortemPrefix);
    if (!listed)
        return fail(listed.error().code, "cannot list the archived post-mortems, which may name checkpoints: "
                                             + listed.error().message);
    PostMortemCache seen;
    for (const auto &blob : *listed) {
        const std::string version =
            blob.key + "@" + std::to_string(blob.modifiedUnixMs) + ":" + std::to_string(blob.size);
        std::string manifest;
        if (auto known = cache.find(version); known != cache.end()) {
            manifest = known->second;
        } else {
            auto read = postMortemManifest(blobs, blob);
            if (!read)
                return std::unexpected(read.error());
            manifest = std::move(*read);
        }
        if (!manifest.empty()) {
            references.manifests.insert(manifest);
            references.postMortems++;
        }
        seen.emplace(version, std::move(manifest));
    }
    cache = std::move(seen);
    return {};
}

} // namespace paddock::checkpoints
