#include "broker/review/open_review.h"

#include <openssl/evp.h>

#include <random>

namespace paddock::review {

namespace {

std::string newReviewId()
{
    thread_local std::mt19937_64 random{std::random_device{}()};
    static const char *digits = "0123456789abcdef";
    std::string id = "r-";
    uint64_t bits = random();
    for (int i = 0; i < 12; ++i, bits >>= 4)
        id += digits[bits & 0xf];
    return id;
}

} // namespace

std::string changeHash(const std::string &change)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(change.data(), change.size(), digest, &length, EVP_sha256(), nullptr);
    static const char *hex = "0123456789abcdef";
    std::string out = "sha256:";
    for (unsigned int i = 0; i < length; ++i) {
        out += hex[digest[i] >> 4];
        out += hex[digest[i] & 15];
    }
    return out;
}

core::NewEvent openReview(const ReviewRequest &request, const ReviewPolicy &policy, int64_t nowUnixMs)
{
    const nlohmann::json payload{
        {"review_id", newReviewId()},
        {"kind", request.kind},
        {"summary", request.summary},
        {"change", request.change},
        {"change_format", request.changeFormat},
        {"change_hash", changeHash(request.change)},
        {"impact", request.impact},
        {"risk", request.risk.empty() ? policy.riskOf(request.kind, request.targetCount) : request.risk},
        {"justification", request.justification},
        {"policy_verdict", request.policyVerdict},
        {"requester", request.requester},
        {"agent", request.agent},
        {"target_count", request.targetCount},
        {"cost_micros", request.costMicros},
        {"expires_unix_ms", nowUnixMs + policy.expiryMs},
        {"tool_call_id", request.toolCallId},
        {"payload", request.payload.is_object() ? request.payload : nlohmann::json::object()},
    };
    return core::NewEvent{core::kind::ApprovalRequested,
                          payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 0};
}

} // namespace paddock::review
