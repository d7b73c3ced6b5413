#pragma once
// Reads the two XML documents S3 answers with: a ListObjectsV2 page and an <Error>. Not an XML
// parser: it finds the leaf elements S3 writes (<Key>, <Size>, <LastModified>, <IsTruncated>,
// <NextContinuationToken>, <Code>, <Message>), which hold text only, and decodes their entities
// (&amp; &lt; &gt; &quot; &apos; and numeric ones). Element text holding markup, CDATA included,
// is refused as unreadable rather than guessed at.
//
// Threads: pure functions, callable from any thread.

#include "broker/checkpoints/blob_store.h"
#include "common/result.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::checkpoints::s3 {

struct ListPage {
    std::vector<BlobInfo> objects;    // keys as the bucket names them, store prefix included
    bool truncated = false;
    std::string nextContinuationToken;
};

// InvalidArgument naming what is wrong when the page cannot be read.
Result<ListPage> parseListPage(std::string_view xml);

struct ErrorBody {
    std::string code;      // "NoSuchKey"; "" when the body is not an S3 <Error>
    std::string message;
};

ErrorBody parseErrorBody(std::string_view xml);

// Entities decoded; nullopt for an unknown or malformed entity or for markup ('<') in the text.
std::optional<std::string> xmlText(std::string_view raw);

// "2026-12-03T14:51:12.000Z" (ISO 8601 in UTC, fraction optional) as Unix milliseconds.
std::optional<int64_t> parseIso8601Ms(std::string_view text);

} // namespace paddock::checkpoints::s3
