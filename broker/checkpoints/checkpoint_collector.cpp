#include "broker/checkpoints/checkpoint_collector.h"

#include "checkpoint/sha256.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <unordered_set>

namespace paddock::checkpoints {

namespace {

constexpr const char *kChunkPrefix = "chunks/";
constexpr const char *kManifestPrefix = "manifests/";

Error stoppingError()
{
    return {ErrorCode::Unavailable, "the broker is stopping, so the checkpoint store was not looked at; ask again "
                                    "once it runs"};
}

// The id a "manifests/<id>" key names; "" for a key that is not a manifest's (left alone).
std::string manifestIdOf(const std::string &key)
{
    std::string id = key.substr(std::strlen(kManifestPrefix));
    return checkpoint::isSha256Hex(id) ? id : std::string();
}

// The hash a "chunks/ab/ab12..." key names; "" for a key that is not a chunk's (left alone).
std::string chunkHashOf(const std::string &key)
{
    std::string hash = key.substr(key.rfind('/') + 1);
    return checkpoint::isSha256Hex(hash) && key == CheckpointStore::chunkKey(hash) ? hash : std::string();
}

// A stored manifest checked against its name, read past the store's cache: a pass reads them all,
// and the cache is for the checkpoints in progress.
Result<checkpoint::Manifest> readManifest(BlobStore &blobs, const std::string &id)
{
    auto json = blobs.get(CheckpointStore::manifestKey(id));
    if (!json)
        return std::unexpected(json.error());
    if (checkpoint::sha256Hex(*json) != id)
        return fail(ErrorCode::DataLoss, "checkpoint manifest " + id + " in " + blobs.describe()
                                             + " is damaged: its bytes do not hash to its name");
    auto manifest = checkpoint::Manifest::parse(*json);
    if (!manifest)
        return fail(ErrorCode::DataLoss, "checkpoint manifest " + id + " in " + blobs.describe() + " cannot be read: "
                                             + manifest.error().message);
    return manifest;
}

void stoppedEarly(CollectionReport &report)
{
    report.problem = "the broker stopped during the collection; the next one goes on";
}

std::string mib(int64_t bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return text;
}

void logCollection(const Result<CollectionReport> &report, int64_t retentionHours)
{
    if (!report) {
        spdlog::warn("checkpoint collection: nothing was deleted: {}", report.error().message);
        return;
    }
    spdlog::info("checkpoint collection: freed {} ({} chunks, {} manifests) in {} ms; kept {} chunks and {} manifests "
                 "for {} live sessions and {} ended ones ({}; {} ended before), {} blobs for the grace period",
                 mib(report->bytesFreed()), report->chunksFreed, report->manifestsFreed, report->durationMs,
                 report->chunksKept, report->manifestsKept, report->liveSessions, report->retainedSessions,
                 retentionHours == 0 ? std::string("kept forever") : "kept " + std::to_string(retentionHours) + " h",
                 report->expiredSessions, report->keptForGrace);
    if (!report->problem.empty())
        spdlog::warn("checkpoint collection: {}", report->problem);
}

} // namespace

// What one pass has learnt so far.
struct CheckpointCollector::Pass {
    int64_t now = 0;
    CollectionReport report;
    std::vector<BlobInfo> chunks;                    // listed first: only these may be deleted
    std::vector<BlobInfo> manifests;
    std::unordered_set<std::string> keptManifests;   // ids
    std::unordered_set<std::string> keptChunks;      // hashes
};

CheckpointCollector::CheckpointCollector(CheckpointStore &store, GuardedBlobStore &blobs, store::EventStore &events,
                                         CollectorOptions options)
    : m_store(store), m_blobs(blobs), m_events(events), m_options(std::move(options))
{
    if (!m_options.clock)
        m_options.clock = nowUnixMs;
}

CheckpointCollector::~CheckpointCollector()
{
    stop();
}

Result<CollectionReport> CheckpointCollector::collect(int64_t nowUnixMs, bool dryRun)
{
    std::lock_guard pass(m_passMutex);
    auto report = runPass(nowUnixMs, dryRun, nullptr);
    if (dryRun)
        return report;
    if (report) {
        m_blobs.forgetUsesBefore(nowUnixMs - kCollectGraceMs);
        std::lock_guard lock(m_mutex);
        m_lastCollection = *report;
        m_figures.reset();   // they would show what was just freed
    }
    logCollection(report, m_options.retentionHours);
    return report;
}

Result<StorageFigures> CheckpointCollector::figures(int64_t nowUnixMs)
{
    std::lock_guard pass(m_passMutex);
    StorageFigures figures;
    figures.computedUnixMs = nowUnixMs;
    auto report = runPass(nowUnixMs, true, &figures);
    if (!report)
        return std::unexpected(report.error());
    figures.wouldFree = std::move(*report);
    std::lock_guard lock(m_mutex);
    m_figures = figures;
    return figures;
}

std::optional<CollectionReport> CheckpointCollector::lastCollection() const
{
    std::lock_guard lock(m_mutex);
    return m_lastCollection;
}

Result<CollectionReport> CheckpointCollector::runPass(int64_t nowUnixMs, bool dryRun, StorageFigures *figures)
{
    const int64_t startUs = monotonicUs();
    Pass pass;
    pass.now = nowUnixMs;
    pass.report.dryRun = dryRun;
    pass.report.atUnixMs = nowUnixMs;
    auto chunks = m_blobs.list(kChunkPrefix);
    if (!chunks)
        return std::unexpected(chunks.error());
    pass.chunks = std::move(*chunks);
    auto references = sessionReferences(m_events, nowUnixMs, m_options.retentionHours * 3'600'000, m_stopping,
                                        m_referenceCache);
    if (!references)
        return std::unexpected(references.error());
    if (auto added = addPostMortemReferences(m_blobs, *references, m_postMortemCache); !added)
        return std::unexpected(added.error());
    if (auto marked = markManifests(pass, *references); !marked)
        return std::unexpected(marked.error());
    markChunks(pass);
    if (figures)
        countFigures(pass, *figures);
    sweepManifests(pass);
    sweepChunks(pass);
    pass.report.durationMs = (monotonicUs() - startUs) / 1000;
    return std::move(pass.report);
}

bool CheckpointCollector::recentlyUsed(const BlobInfo &blob, int64_t nowUnixMs) const
{
    const int64_t since = nowUnixMs - kCollectGraceMs;
    return blob.modifiedUnixMs >= since || m_blobs.lastUsedUnixMs(blob.key) >= since;
}

Status CheckpointCollector::markManifests(Pass &pass, const References &references)
{
    auto listed = m_blobs.list(kManifestPrefix);
    if (!listed)
        return std::unexpected(listed.error());
    pass.manifests = std::move(*listed);
    CollectionReport &report = pass.report;
    report.liveSessions = references.liveSessions;
    report.retainedSessions = references.retainedSessions;
    report.expiredSessions = references.expiredSessions;
    std::unordered_set<std::string> stored;
    for (const auto &blob : pass.manifests) {
        std::string id = manifestIdOf(blob.key);
        if (id.empty())
            continue;
        stored.insert(id);
        if (references.manifests.contains(id)) {
            report.manifestsKept++;
            pass.keptManifests.insert(std::move(id));
        } else if (recentlyUsed(blob, pass.now)) {
            report.keptForGrace++;
            pass.keptManifests.insert(std::move(id));
        }
    }
    for (const auto &id : references.manifests)
        report.missingManifests += stored.contains(id) ? 0 : 1;
    return {};
}

void CheckpointCollector::markChunks(Pass &pass)
{
    int64_t unreadable = 0;
    std::string first;
    for (const auto &id : pass.keptManifests) {
        if (m_stopping.load()) {
            pass.report.chunksSwept = false;
            pass.report.problem = stoppingError().message;
            return;
        }
        auto manifest = readManifest(m_blobs, id);
        if (!manifest) {
            if (unreadable++ == 0)
                first = manifest.error().message;
            continue;
        }
        m_fileBytes[id] = manifest->fileBytes();
        for (auto &hash : manifest->chunkHashes())
            pass.keptChunks.insert(std::move(hash));
    }
    if (unreadable == 0)
        return;
    pass.report.chunksSwept = false;
    pass.report.problem = std::string(pass.report.dryRun ? "no chunk would be collected: " : "no chunk was collected: ")
        + std::to_string(unreadable) + " kept checkpoint manifest"
        + (unreadable == 1 ? "" : "s") + " cannot be read, and the chunks a manifest may name are never deleted "
        "without reading it (" + first + "). Restore the manifest from a backup, or delete it from the store if no "
        "session needs that checkpoint; the next collection then sweeps chunks again";
}

void CheckpointCollector::countFigures(Pass &pass, StorageFigures &figures)
{
    for (const auto &blob : pass.chunks) {
        figures.chunks++;
        figures.chunkBytes += blob.size;
    }
    std::unordered_map<std::string, int64_t> fileBytes;   // the manifests stored now
    for (const auto &blob : pass.manifests) {
        figures.manifests++;
        figures.manifestBytes += blob.size;
        const std::string id = manifestIdOf(blob.key);
        if (id.empty() || m_stopping.load())
            continue;
        auto known = m_fileBytes.find(id);
        if (known == m_fileBytes.end()) {
            auto manifest = readManifest(m_blobs, id);
            if (!manifest) {
                figures.unreadableManifests++;
                continue;
            }
            known = m_fileBytes.emplace(id, manifest->fileBytes()).first;
        }
        figures.logicalBytes += known->second;
        fileBytes.emplace(id, known->second);
    }
    m_fileBytes = std::move(fileBytes);
}

// Deletes the blob unless it was used within the grace period (a dry run only counts it). False
// when it stays; a failed delete is the report's problem, and the next pass tries again.
bool CheckpointCollector::removeBlob(Pass &pass, const BlobInfo &blob)
{
    if (pass.report.dryRun)
        return true;
    auto removed = m_blobs.removeUnlessUsedSince(blob.key, pass.now - kCollectGraceMs);
    if (!removed) {
        if (pass.report.problem.empty())
            pass.report.problem = "cannot delete " + blob.key + ": " + removed.error().message
                + "; the next collection tries again";
        return false;
    }
    if (!*removed)
        pass.report.keptForGrace++;
    return *removed;
}

void CheckpointCollector::sweepManifests(Pass &pass)
{
    for (const auto &blob : pass.manifests) {
        const std::string id = manifestIdOf(blob.key);
        if (id.empty() || pass.keptManifests.contains(id))
            continue;
        if (m_stopping.load())
            return stoppedEarly(pass.report);
        if (removeBlob(pass, blob)) {
            pass.report.manifestsFreed++;
            pass.report.manifestBytesFreed += blob.size;
        }
    }
}

void CheckpointCollector::sweepChunks(Pass &pass)
{
    for (const auto &blob : pass.chunks) {
        const std::string hash = chunkHashOf(blob.key);
        if (hash.empty())
            continue;
        if (pass.keptChunks.contains(hash)) {
            pass.report.chunksKept++;
            continue;
        }
        if (!pass.report.chunksSwept)
            continue;
        if (recentlyUsed(blob, pass.now)) {
            pass.report.keptForGrace++;
            continue;
        }
        if (m_stopping.load())
            return stoppedEarly(pass.report);
        if (removeBlob(pass, blob)) {
            pass.report.chunksFreed++;
            pass.report.chunkBytesFreed += blob.size;
        }
    }
}

void CheckpointCollector::start()
{
    std::lock_guard lock(m_mutex);
    if (m_running || m_stopping.load())
        return;
    m_running = true;
    m_thread = std::thread([this] { run(); });
}

void CheckpointCollector::stop()
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_running)
            return;
        m_stopping = true;
    }
    m_wake.notify_all();
    m_thread.join();
    std::deque<Job> left;
    {
        std::lock_guard lock(m_mutex);
        left.swap(m_jobs);
        m_running = false;
    }
    for (auto &job : left)
        job(false);
}

void CheckpointCollector::post(Job job)
{
    {
        std::lock_guard lock(m_mutex);
        if (m_running && !m_stopping.load()) {
            m_jobs.push_back(std::move(job));
            m_wake.notify_all();
            return;
        }
    }
    job(false);
}

void CheckpointCollector::collectLater(bool dryRun, std::function<void(Result<CollectionReport>)> done)
{
    post([this, dryRun, done = std::move(done)](bool run) {
        done(run ? collect(now(), dryRun) : Result<CollectionReport>(std::unexpected(stoppingError())));
    });
}

void CheckpointCollector::figuresLater(std::function<void(Result<StorageFigures>)> done)
{
    // Fresh enough figures (the console asks every few seconds) answer at once; otherwise the
    // collector's thread counts, and a request queued behind that count gets its figures.
    auto fresh = [this]() -> std::optional<StorageFigures> {
        std::lock_guard lock(m_mutex);
        if (m_figures && now() - m_figures->computedUnixMs < m_options.figuresMaxAgeMs)
            return m_figures;
        return std::nullopt;
    };
    if (auto figures = fresh())
        return done(std::move(*figures));
    post([this, fresh, done = std::move(done)](bool run) {
        if (!run)
            return done(std::unexpected(stoppingError()));
        if (auto figures = fresh())
            return done(std::move(*figures));
        done(figures(now()));
    });
}

void CheckpointCollector::run()
{
    using Clock = std::chrono::steady_clock;
    auto nextPass = Clock::now() + std::chrono::milliseconds(m_options.firstPassDelayMs);
    std::unique_lock lock(m_mutex);
    while (!m_stopping.load()) {
        const auto woken = [&] { return m_stopping.load() || !m_jobs.empty(); };
        if (m_jobs.empty() && !m_wake.wait_until(lock, nextPass, woken)) {
            lock.unlock();
            collect(now(), false);
            lock.lock();
            nextPass = Clock::now() + std::chrono::milliseconds(m_options.intervalMs);
            continue;
        }
        if (m_stopping.load())
            break;
        Job job = std::move(m_jobs.front());
        m_jobs.pop_front();
        lock.unlock();
        job(true);
        lock.lock();
    }
}

} // namespace paddock::checkpoints
