#pragma once
// For Qt tests whose answers come from another thread (a real client's gRPC calls, a started
// process): runs the event loop until pred holds (true) or timeoutMs passes (false).

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>

#include <functional>

namespace paddock::test {

inline bool waitFor(const std::function<bool()> &pred, int timeoutMs = 20'000)
{
    QElapsedTimer timer;
    timer.start();
    while (!pred()) {
        if (timer.elapsed() > timeoutMs)
            return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        QThread::msleep(2);
    }
    return true;
}

} // namespace paddock::test
