#pragma once
// The broker's protobuf answers as the console's own value types (models/console_types.h and
// friends): the only place the console converts between the two. Used by the gRPC clients in
// app/client; nothing outside app/client sees a protobuf type.
//
// Threads: pure functions; KindInterner is one per reactor (a call's reactions never run
// concurrently).

#include "app/client/console_client.h"

#include "paddock/v1/operations.pb.h"
#include "paddock/v1/sessions.pb.h"

#include <grpcpp/support/status.h>

#include <QByteArray>
#include <QHash>
#include <QString>

#include <string>

namespace paddock::console {

SessionInfo toSessionInfo(const v1::Session &s);
PoolInfo toPoolInfo(const v1::PoolInfo &p);
CheckpointStorage toCheckpointStorage(const v1::StorageInfo &s);
QByteArray toByteArray(const std::string &data);
PostMortemInfo toPostMortem(const v1::PostMortem &p);
SnapshotFile toSnapshotFile(const v1::SnapshotFile &f);
DebugShellInfo toDebugShell(const v1::DebugShell &d);

// Kinds repeat endlessly; sharing one QString per kind keeps an EventRecord's kind free of its own
// allocation. One per reactor: a call's reactions never run concurrently.
class KindInterner {
public:
    QString intern(const std::string &kind)
    {
        const auto found = m_kinds.constFind(QByteArray::fromRawData(kind.data(), static_cast<qsizetype>(kind.size())));
        if (found != m_kinds.constEnd())
            return *found;
        const QByteArray key(kind.data(), static_cast<qsizetype>(kind.size()));
        return *m_kinds.insert(key, QString::fromUtf8(key));
    }

private:
    QHash<QByteArray, QString> m_kinds;
};

EventRecord toEventRecord(const v1::Event &e, KindInterner &kinds);
// The status's message for a person, or "gRPC status N" when it has none.
QString statusText(const grpc::Status &status);

} // namespace paddock::console
