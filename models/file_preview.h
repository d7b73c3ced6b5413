#pragma once
// How the snapshot viewer shows a file: as text when it reads as text (UTF-8, no NUL bytes, few
// control characters), else as a hex dump of its start with "binary, N bytes".
//
// Threads: pure functions; call from anywhere.

#include <QByteArray>
#include <QString>

namespace paddock::console {

struct FilePreview {
    bool isText = false;
    QString text;      // the text, or the hex dump
    QString note;      // "binary, 4,096 bytes", "text, first 256 KiB of 3 MiB shown", ...
};

bool looksLikeText(const QByteArray &content);
// Lines of "00000010  48 65 6c 6c 6f 0a ...  |Hello.|", 16 bytes each.
QString hexDump(const QByteArray &content, qint64 startOffset = 0);
// content: the start of the file (at most what was read); totalSize: the whole file's size.
FilePreview previewFile(const QByteArray &content, qint64 totalSize, int hexBytes = 4096);

} // namespace paddock::console
