#include "broker/store/append_checks.h"

#include <algorithm>

namespace paddock::store {

namespace {

constexpr size_t kMaxSessionIdBytes = 256;

bool looksLikeJsonObject(std::string_view text)
{
    auto isSpace = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    while (!text.empty() && isSpace(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && isSpace(text.back()))
        text.remove_suffix(1);
    return text.size() >= 2 && text.front() == '{' && text.back() == '}';
}

std::string hexEncode(std::string_view bytes)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(kDigits[c >> 4]);
        out.push_back(kDigits[c & 15]);
    }
    return out;
}

std::optional<std::string> hexDecode(std::string_view hex)
{
    if (hex.size() % 2 != 0)
        return std::nullopt;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        const int hi = nibble(hex[i]);
        const int lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return out;
}

// Page tokens are opaque to clients; inside they carry the last row's creation order.
} // namespace

Status validateAppend(const AppendRequest &request)
{
    if (request.sessionId.empty() && request.events.empty() && !request.writes.empty())
        return {};   // statements beside the log only
    if (request.sessionId.empty())
        return fail(ErrorCode::InvalidArgument, "append: the session id is empty; give the session's id");
    if (request.sessionId.size() > kMaxSessionIdBytes)
        return fail(ErrorCode::InvalidArgument, "append: the session id is longer than "
                                                    + std::to_string(kMaxSessionIdBytes) + " bytes");
    if (request.events.empty())
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": no events; send at least one");
    if (request.expectedLastSeq < AppendRequest::kAnySeq)
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": expectedLastSeq "
                        + std::to_string(request.expectedLastSeq) + " is negative; use 0 to create, "
                        + "the tail's seq to compare-and-append, or kAnySeq");
    for (size_t i = 0; i < request.events.size(); ++i) {
        const auto &event = request.events[i];
        const std::string where = "append to session " + request.sessionId + ", event " + std::to_string(i + 1);
        if (event.kind.empty())
            return fail(ErrorCode::InvalidArgument, where + ": the kind is empty");
        if (!looksLikeJsonObject(event.payload))
            return fail(ErrorCode::InvalidArgument, where + " (" + event.kind
                                                        + "): the payload is not a JSON object; send \"{}\" for none");
        const bool created = event.kind == core::kind::SessionCreated;
        const bool mustCreate = request.expectedLastSeq == 0 && i == 0;
        if (mustCreate && !created)
            return fail(ErrorCode::InvalidArgument,
                        where + ": a new session's first event must be session.created, not " + event.kind);
        if (created && !mustCreate)
            return fail(ErrorCode::InvalidArgument,
                        where + ": session.created may only open a new session (expectedLastSeq 0, first event)");
    }
    return {};
}

Error leaseLostRefusal(const AppendRequest &request)
{
    return {ErrorCode::FailedPrecondition, "the lease " + std::to_string(request.leaseToken) + " of session "
                                               + request.sessionId + " is no longer held (it was released, or it "
                                               "expired and went to another worker); nothing was appended: stop this step"};
}

Error noSuchSession(const std::string &sessionId)
{
    return {ErrorCode::NotFound, "no session " + sessionId + "; check the id (paddockctl ls lists sessions)"};
}

std::optional<Error> expectedTailRefusal(const AppendRequest &request, const core::SessionState *current)
{
    const std::string &sessionId = request.sessionId;
    if (!current) {
        if (request.expectedLastSeq != 0)
            return noSuchSession(sessionId);
    } else if (request.expectedLastSeq == 0) {
        return Error{ErrorCode::AlreadyExists, "session " + sessionId + " already exists; pick another id"};
    } else if (request.expectedLastSeq != AppendRequest::kAnySeq && request.expectedLastSeq != current->lastSeq) {
        return Error{ErrorCode::Aborted, "session " + sessionId + " ends at seq " + std::to_string(current->lastSeq)
                                             + ", not " + std::to_string(request.expectedLastSeq)
                                             + "; someone appended first: re-read the log and decide again"};
    }
    return std::nullopt;
}

Result<SessionPaging> sessionPaging(const SessionQuery &query)
{
    SessionPaging paging;
    paging.pageSize = std::clamp(query.pageSize, 1, kMaxSessionPageSize);
    if (!query.pageToken.empty()) {
        paging.before = decodeSessionPageToken(query.pageToken);
        if (!paging.before)
            return fail(ErrorCode::InvalidArgument,
                        "the page token is not one this broker issued; list again without a page token");
    }
    return paging;
}

std::string encodeSessionPageToken(int64_t ord) { return hexEncode("v1:" + std::to_string(ord)); }

std::optional<int64_t> decodeSessionPageToken(std::string_view token)
{
    auto text = hexDecode(token);
    if (!text || !text->starts_with("v1:") || text->size() == 3 || text->size() > 23)
        return std::nullopt;
    int64_t ord = 0;
    for (char c : text->substr(3)) {
        if (c < '0' || c > '9')
            return std::nullopt;
        ord = ord * 10 + (c - '0');
    }
    return ord > 0 ? std::optional(ord) : std::nullopt;
}

} // namespace paddock::store
