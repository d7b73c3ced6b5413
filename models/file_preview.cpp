#include "models/file_preview.h"

#include "models/snapshot_files_model.h"

#include <QStringDecoder>

namespace paddock::console {

bool looksLikeText(const QByteArray &content)
{
    if (content.contains('\0'))
        return false;
    // A read cut at maxBytes may end inside a UTF-8 sequence; judge without the last 3 bytes.
    const QByteArray body = content.size() > 3 ? content.left(content.size() - 3) : content;
    QStringDecoder decoder(QStringDecoder::Utf8, QStringDecoder::Flag::Stateless);
    const QString text = decoder(body);
    if (decoder.hasError())
        return false;
    qsizetype control = 0;
    for (QChar c : text) {
        const ushort u = c.unicode();
        if (u < 0x20 && u != '\n' && u != '\r' && u != '\t' && u != '\f' && u != 0x1b)
            ++control;
    }
    return control * 100 <= text.size();   // at most 1%
}

QString hexDump(const QByteArray &content, qint64 startOffset)
{
    QString out;
    out.reserve(content.size() * 4 + 16);
    for (qsizetype line = 0; line < content.size(); line += 16) {
        out += QStringLiteral("%1  ").arg(startOffset + line, 8, 16, QLatin1Char('0'));
        QString ascii;
        for (qsizetype i = 0; i < 16; ++i) {
            if (line + i < content.size()) {
                const auto byte = static_cast<unsigned char>(content.at(line + i));
                out += QStringLiteral("%1 ").arg(byte, 2, 16, QLatin1Char('0'));
                ascii += byte >= 0x20 && byte < 0x7f ? QChar(char16_t(byte)) : QChar(u'.');
            } else {
                out += QStringLiteral("   ");
            }
            if (i == 7)
                out += u' ';
        }
        out += QStringLiteral(" |") + ascii + QStringLiteral("|\n");
    }
    return out;
}

FilePreview previewFile(const QByteArray &content, qint64 totalSize, int hexBytes)
{
    FilePreview preview;
    const bool partial = totalSize > content.size();
    if (content.isEmpty()) {
        preview.isText = true;
        preview.note = totalSize > 0 ? QStringLiteral("nothing read of %1").arg(formatBytes(totalSize))
                                     : QStringLiteral("empty file");
        return preview;
    }
    if (looksLikeText(content)) {
        preview.isText = true;
        preview.text = QString::fromUtf8(content);
        preview.note = partial ? QStringLiteral("text, the first %1 of %2 shown; download for all of it")
                                     .arg(formatBytes(content.size()), formatBytes(totalSize))
                               : QStringLiteral("text, %1").arg(formatBytes(totalSize));
        return preview;
    }
    preview.text = hexDump(content.left(hexBytes));
    preview.note = QStringLiteral("binary, %L1 bytes").arg(totalSize);
    if (totalSize > hexBytes)
        preview.note += QStringLiteral("; the first %L1 shown in hex").arg(qMin<qint64>(hexBytes, content.size()));
    return preview;
}

} // namespace paddock::console
