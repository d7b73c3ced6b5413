#include "broker/daemon/broker_wiring.h"

#include "broker/checkpoints/checkpoint_collector.h"
#include "broker/checkpoints/local_blob_store.h"
#include "broker/checkpoints/s3_blob_store.h"
#include "broker/cost/budget_source.h"
#include "broker/engine/step_engine.h"
#include "broker/otlp/otlp_exporter.h"
#include "broker/policy/policy_file.h"
#include "broker/review/review_desk.h"
#include "broker/secrets/secret_store.h"
#include "broker/server/broker_api.h"
#include "broker/server/stream_hub.h"
#include "common/paths.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <climits>

namespace paddock::daemon {

namespace {

// propose_change with records, within policy or approved: [{key, value}, ...] into the agent's
// durable records (UpdateAgent's rule: records given are set, the others kept).
std::function<Status(const std::string &, const nlohmann::json &)> recordWriter(store::AgentStore *agentsStore)
{
    return [agentsStore](const std::string &name, const nlohmann::json &records) -> Status {
        auto agent = agentsStore->get(name);
        if (!agent)
            return std::unexpected(agent.error());
        if (!records.is_array())
            return fail(ErrorCode::InvalidArgument, "a record change is a JSON list of {\"key\", \"value\"} objects");
        agent->records.clear();
        for (const auto &record : records) {
            if (!record.is_object() || !record.contains("key") || !record["key"].is_string() || !record.contains("value"))
                return fail(ErrorCode::InvalidArgument, "each record is an object with a string \"key\" and a \"value\"");
            agent->records[record["key"].get<std::string>()] = record["value"].dump();
        }
        auto updated = agentsStore->update(*agent);
        return updated ? Status{} : Status{std::unexpected(updated.error())};
    };
}

checkpoints::S3Options s3Options(const broker_config::CheckpointsConfig &settings)
{
    checkpoints::S3Options options;
    options.endpoint = settings.endpoint;
    options.bucket = settings.bucket;
    options.region = settings.region;
    options.prefix = settings.prefix;
    options.pathStyle = settings.pathStyle;
    options.credentialsFile = settings.credentialsFile;
    options.timeoutMs = settings.timeoutMs;
    return options;
}

// The checkpoint store [checkpoints] names: the broker's own directory (the default) or a bucket.
Result<std::unique_ptr<checkpoints::CheckpointStore>> openCheckpointStore(const BrokerConfig &config)
{
    const auto &settings = config.checkpoints;
    std::unique_ptr<checkpoints::BlobStore> blobs;
    if (settings.store == "s3") {
        auto bucket = checkpoints::S3BlobStore::open(s3Options(settings));
        if (!bucket)
            return std::unexpected(bucket.error());
        blobs = std::move(*bucket);
    } else {
        auto dir = checkpoints::LocalBlobStore::open(settings.dir.empty() ? config.dataDir / "checkpoints" : settings.dir);
        if (!dir)
            return std::unexpected(dir.error());
        blobs = std::move(*dir);
    }
    spdlog::info("checkpoints: {}", blobs->describe());
    // Behind a GuardedBlobStore: collection never deletes what a checkpoint in progress counts on.
    return std::make_unique<checkpoints::CheckpointStore>(std::make_unique<checkpoints::GuardedBlobStore>(std::move(blobs)),
                                                          settings.store);
}

// [otlp]'s exporter, its headers read now: a file or variable that is missing stops the start.
Result<std::unique_ptr<otlp::OtlpExporter>> otlpExporter(const BrokerConfig &config, store::EventStore &store)
{
    auto headers = broker_config::otlpHeaders(config.otlp);
    if (!headers)
        return std::unexpected(headers.error());
    otlp::ExporterOptions options;
    options.endpoint = config.otlp.endpoint;
    options.headers = std::move(*headers);
    options.timeoutMs = config.otlp.timeoutMs;
    options.batchSize = config.otlp.batchSize;
    options.intervalMs = config.otlp.intervalMs;
    options.maxBackoffMs = config.otlp.maxBackoffMs;
    options.metrics = config.otlp.metrics;
    options.serviceName = config.otlp.serviceName;
    options.exclusiveStore = !config.store.postgres();   // one broker per SQLite file
    return std::make_unique<otlp::OtlpExporter>(store, std::move(options));
}

checkpoints::CollectorOptions collectorOptions(const BrokerConfig &config)
{
    checkpoints::CollectorOptions options;
    options.retentionHours = config.checkpoints.retentionHours;
    return options;
}

} // namespace

struct BrokerWiring::Parts {
    std::unique_ptr<llm::ModelRegistry> models;
    std::unique_ptr<secrets::SecretStore> secrets;   // outlives the engine and the service that use it
    std::unique_ptr<store::AgentStore> agents;
    std::unique_ptr<store::DecisionStore> decisions;
    std::unique_ptr<engine::EnvironmentDecider> decider;
    std::unique_ptr<store::CostQueries> costs;        // these four outlive the engine and the service too
    std::unique_ptr<store::ReviewQueries> reviewQueries;
    std::unique_ptr<review::ReviewDesk> reviews;
    std::unique_ptr<cost::IndexedBudgets> budgets;
    std::unique_ptr<server::StreamHub> hub;
    std::unique_ptr<checkpoints::CheckpointStore> checkpointStore;
    std::unique_ptr<checkpoints::Checkpointer> checkpointer;
    std::unique_ptr<checkpoints::PostMortemArchive> postMortems;
    std::unique_ptr<checkpoints::CheckpointCollector> collector;
    std::unique_ptr<engine::StepEngine> engine;
    std::unique_ptr<server::BrokerApi> api;
    std::unique_ptr<otlp::OtlpExporter> otlpExporter;   // [otlp]: off its own thread, reads the store
    bool stopped = false;

    // The checkpoint store [checkpoints] names, the Checkpointer over it, the post-mortem archive
    // and the collection (started here, off the engine's path).
    Status openCheckpoints(const BrokerConfig &config, store::EventStore &store, const placement::PoolSet &pools)
    {
        auto opened = openCheckpointStore(config);
        if (!opened)
            return std::unexpected(opened.error());
        checkpointStore = std::move(*opened);
        checkpointer = std::make_unique<checkpoints::Checkpointer>(*checkpointStore);
        postMortems = std::make_unique<checkpoints::PostMortemArchive>(
            *checkpointStore, pools,
            [&store](const std::string &sessionId) { return store.readEvents(sessionId, 1, INT_MAX); },
            checkpoints::PostMortemArchive::kCopyIntervalMs, config.checkpoints.retentionHours * 3600 * 1000);
        // The collection's blobs are the guard openCheckpointStore put in front of the backend.
        collector = std::make_unique<checkpoints::CheckpointCollector>(
            *checkpointStore, static_cast<checkpoints::GuardedBlobStore &>(checkpointStore->blobs()), store,
            collectorOptions(config));
        collector->start();
        return {};
    }

    // What the four gRPC services are given of these parts.
    server::ServiceOptions serviceOptions(const BrokerConfig &config,
                                          std::shared_ptr<const auth::PrincipalMap> principals,
                                          const llm::ModelRegistry &registry) const
    {
        server::ServiceOptions serviceOptions;
        serviceOptions.principals = std::move(principals);
        serviceOptions.playbookDir = config.models.playbookDir;
        serviceOptions.defaultTier = config.defaultTier;
        serviceOptions.debugShellIdleTimeoutMs = config.debugShellIdleTimeoutMs;
        serviceOptions.modelNames = registry.names();
        serviceOptions.secrets = secrets.get();
        serviceOptions.decider = decider.get();
        serviceOptions.decisions = decisions.get();
        serviceOptions.costs = costs.get();
        serviceOptions.reviews = reviews.get();
        serviceOptions.budgets = budgets.get();
        serviceOptions.postMortems = postMortems.get();
        serviceOptions.checkpointer = checkpointer.get();
        serviceOptions.storage = collector.get();
        return serviceOptions;
    }
};

BrokerWiring::BrokerWiring() : m_parts(std::make_unique<Parts>()) {}

BrokerWiring::~BrokerWiring()
{
    stop();
}

Result<std::unique_ptr<BrokerWiring>> BrokerWiring::create(const BrokerConfig &config, store::EventStore &store,
                                                       placement::PoolSet &pools,
                                                       std::shared_ptr<const auth::PrincipalMap> principals)
{
    std::unique_ptr<BrokerWiring> core(new BrokerWiring());
    Parts *parts = core->m_parts.get();
    // Agents, decisions, costs and reviews are tables of the event store, which has just migrated
    // them; they read (and agents write) through it, on either backend.
    auto agentStore = store::AgentStore::open(store);
    if (!agentStore)
        return std::unexpected(agentStore.error());
    parts->agents = std::move(*agentStore);
    auto decisionStore = store::DecisionStore::open(store);
    if (!decisionStore)
        return std::unexpected(decisionStore.error());
    parts->decisions = std::move(*decisionStore);
    // The policy file is read once; each part takes its own tables from it.
    policy::PolicyFile policyFile;
    if (!config.policyFile.empty()) {
        auto loaded = policy::loadPolicyFile(config.policyFile, config.policyFileWhere);
        if (!loaded)
            return std::unexpected(loaded.error());
        policyFile = std::move(*loaded);
    }
    auto reviewPolicy = review::parseReviewPolicy(policyFile);
    if (!reviewPolicy)
        return std::unexpected(reviewPolicy.error());
    auto tierPolicy = policy::parseTierPolicy(policyFile);
    if (!tierPolicy)
        return std::unexpected(tierPolicy.error());
    spdlog::info("policy: {} ({} tier rules)", config.policyFile.empty() ? "built-in defaults" : config.policyFile.string(),
                 tierPolicy->rules.size());
    auto costs = store::CostQueries::open(store);
    if (!costs)
        return std::unexpected(costs.error());
    parts->costs = std::move(*costs);
    auto reviewQueries = store::ReviewQueries::open(store);
    if (!reviewQueries)
        return std::unexpected(reviewQueries.error());
    parts->reviewQueries = std::move(*reviewQueries);
    parts->reviews = std::make_unique<review::ReviewDesk>(store, *parts->reviewQueries, *reviewPolicy);
    // Agents' budgets come from the agents' store; an agent it does not know (the built-in default)
    // has none, and then only the session's own budget applies.
    store::AgentStore *agentsStore = parts->agents.get();
    parts->budgets = std::make_unique<cost::IndexedBudgets>(
        *parts->costs, [agentsStore](const std::string &name) {
            auto agent = agentsStore->get(name);
            return agent ? cost::AgentBudget{agent->budgetPerSessionMicros, agent->budgetPerDayMicros}
                         : cost::AgentBudget{};
        });

    parts->models = std::make_unique<llm::ModelRegistry>(config.models);
    llm::ModelRegistry *models = parts->models.get();
    engine::ModelLookup lookup = [models](const std::string &name) { return models->find(name); };

    // Secrets live next to the config file (or in the config directory for the embedded default);
    // a file others may read stops the broker here, before anything could use it.
    const auto secretsFile = (config.configFile.empty() ? defaultConfigDir() : config.configFile.parent_path())
        / secrets::kSecretsFileName;
    auto secretStore = secrets::SecretStore::open(secretsFile);
    if (!secretStore)
        return std::unexpected(secretStore.error());
    parts->secrets = std::move(*secretStore);
    spdlog::info("{} secrets in {}", parts->secrets->list().size(), secretsFile.string());

    parts->hub = std::make_unique<server::StreamHub>(store);
    parts->hub->start();

    parts->decider = std::make_unique<engine::EnvironmentDecider>(parts->agents.get(), pools, std::move(*tierPolicy),
                                                                  config.defaultTier);

    if (auto opened = parts->openCheckpoints(config, store, pools); !opened)
        return std::unexpected(opened.error());

    engine::EngineOptions engineOptions;
    engineOptions.checkpointer = parts->checkpointer.get();
    engineOptions.decider = parts->decider.get();
    engineOptions.workers = config.workers;
    engineOptions.leaseMs = config.leaseMs;
    // Leases name the broker that holds them (leases.worker_id on PostgreSQL): host and process.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    engineOptions.workerPrefix = std::string(host) + ":" + std::to_string(::getpid());
    engineOptions.secrets = parts->secrets.get();
    engineOptions.sandboxIdleReleaseMs = config.sandboxIdleReleaseMs;
    engineOptions.prices = config.prices;
    engineOptions.budgets = parts->budgets.get();
    engineOptions.writeRecords = recordWriter(agentsStore);
    engineOptions.reviewPolicy = *reviewPolicy;
    parts->engine = std::make_unique<engine::StepEngine>(store, pools, lookup, engineOptions);

    parts->api = std::make_unique<server::BrokerApi>(store, *parts->hub, pools, lookup,
                                                     parts->serviceOptions(config, std::move(principals), *models));
    if (config.otlp.enabled()) {
        auto exporter = otlpExporter(config, store);
        if (!exporter)
            return std::unexpected(exporter.error());
        parts->otlpExporter = std::move(*exporter);
        parts->otlpExporter->start();
    }
    return core;
}

server::BrokerApi &BrokerWiring::api()
{
    return *m_parts->api;
}

server::StreamHub &BrokerWiring::hub()
{
    return *m_parts->hub;
}

void BrokerWiring::startEngine()
{
    m_parts->engine->start();
    m_parts->postMortems->start();
}

void BrokerWiring::startReviews()
{
    m_parts->reviews->start();
}

void BrokerWiring::beginShutdown()
{
    if (m_parts->hub)
        m_parts->hub->beginShutdown();
}

void BrokerWiring::stop()
{
    if (m_parts->stopped)
        return;
    m_parts->stopped = true;
    if (m_parts->otlpExporter)
        m_parts->otlpExporter->stop();
    if (m_parts->collector)
        m_parts->collector->stop();
    if (m_parts->reviews)
        m_parts->reviews->stop();
    if (m_parts->engine)
        m_parts->engine->stop();
    if (m_parts->postMortems)
        m_parts->postMortems->stop();
    if (m_parts->hub)
        m_parts->hub->stop();
}

} // namespace paddock::daemon
