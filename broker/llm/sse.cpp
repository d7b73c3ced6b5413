#include "broker/llm/sse.h"

#include "broker/llm/model_http.h"

#include <fmt/format.h>

namespace paddock::llm {

Status SseParser::feed(std::string_view bytes, std::vector<SseEvent> &out)
{
    if (!m_error.empty())
        return fail(ErrorCode::InvalidArgument, m_error);
    for (const char c : bytes) {
        if (m_afterCr) {
            m_afterCr = false;
            if (c == '\n')
                continue;   // CRLF: the CR ended the line
        }
        if (c == '\r' || c == '\n') {
            m_afterCr = c == '\r';
            if (auto ended = endLine(out); !ended)
                return ended;
            continue;
        }
        m_line.push_back(c);
        if (m_line.size() > kMaxSseLineBytes) {
            m_error = fmt::format("a line of the event stream passed {} bytes without ending: \"{}\"",
                                  kMaxSseLineBytes, excerpt(m_line));
            return fail(ErrorCode::InvalidArgument, m_error);
        }
    }
    return {};
}

Status SseParser::endLine(std::vector<SseEvent> &out)
{
    std::string line = std::move(m_line);
    m_line.clear();
    if (line.empty()) {   // the blank line that ends an event
        if (m_hasData)
            out.push_back(std::move(m_event));
        m_event = {};
        m_hasData = false;
        m_pending = false;
        return {};
    }
    if (line.front() == ':')
        return {};   // a comment (servers send them to keep a connection open)
    const size_t colon = line.find(':');
    const std::string_view field = std::string_view(line).substr(0, colon);
    std::string_view value;
    if (colon != std::string::npos) {
        value = std::string_view(line).substr(colon + 1);
        if (value.starts_with(' '))
            value.remove_prefix(1);
    }
    m_pending = true;
    if (field == "data") {
        if (m_hasData)
            m_event.data += '\n';
        m_event.data += value;
        m_hasData = true;
    } else if (field == "event") {
        m_event.event = value;
    } else if (field == "id") {
        m_event.id = value;
    } else if (field != "retry") {
        m_error = fmt::format("the event stream has a line that is not a server-sent event field (data, event, id, "
                              "retry or a comment): \"{}\"",
                              excerpt(line));
        return fail(ErrorCode::InvalidArgument, m_error);
    }
    return {};
}

Status SseParser::finish() const
{
    if (!m_error.empty())
        return fail(ErrorCode::InvalidArgument, m_error);
    if (m_pending || !m_line.empty())
        return fail(ErrorCode::InvalidArgument,
                    "the event stream ended inside an event (no blank line after its last field)");
    return {};
}

} // namespace paddock::llm
