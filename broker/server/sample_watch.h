#pragma once
// WatchSandboxSamples: live resource samples of claimed sandboxes, polled from their pools.
//
// Each watch is a server stream. One poller thread asks the pool for the samples newer than the
// last one sent (GetSamples), once a second per watch, and queues them on the stream. The pool
// answering NotFound ends the stream with OK once the sandbox has been seen (it was released),
// or with NOT_FOUND when it was never claimed; another pool error ends it with that error; the
// client cancelling ends it at the next poll.
//
// Threads: watch() runs on gRPC's callback threads and only registers the stream; the poller
// thread makes every pool call. A stream's reactor is shared by the poller and gRPC (it goes
// when both are done with it). Owned by OperationsService; the destructor ends every watch with
// UNAVAILABLE and joins the poller.
//
// Known limits: the watches are polled one after another, so a pool that answers slowly (up to
// its status deadline) delays the others' samples by as much.

#include "broker/placement/pool_set.h"

#include "paddock/v1/operations.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace paddock::server {

class SampleWatches {
public:
    explicit SampleWatches(const placement::PoolSet &pools, int64_t intervalMs = 1000);
    ~SampleWatches();
    SampleWatches(const SampleWatches &) = delete;
    SampleWatches &operator=(const SampleWatches &) = delete;

    grpc::ServerWriteReactor<v1::SandboxSamples> *watch(const v1::WatchSandboxSamplesRequest &request);
    size_t active() const;

    class Stream;

private:
    void pollerLoop();

    const placement::PoolSet &m_pools;
    const int64_t m_intervalMs;
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<std::shared_ptr<Stream>> m_streams;
    bool m_stopping = false;
    std::thread m_poller;
};

} // namespace paddock::server
