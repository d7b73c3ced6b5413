#pragma once
// Small conversions at the console's gRPC edge, shared by the gRPC clients of this folder:
// protobuf strings to QString and back, and a call's deadline.
//
// Threads: any (pure functions).

#include <QString>

#include <chrono>
#include <string>

namespace paddock::console {

inline QString qs(const std::string &text)
{
    return QString::fromStdString(text);
}

inline std::string ss(const QString &text)
{
    return text.toStdString();
}

inline std::chrono::system_clock::time_point deadlineIn(int ms)
{
    return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

} // namespace paddock::console
