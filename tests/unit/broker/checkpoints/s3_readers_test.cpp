// The S3 backend's pure parts: the XML reader (s3_xml.h), the credentials file (s3_credentials.h)
// and the mapping from answers to errors (s3_errors.h), including the answers s3rver cannot be
// made to give (507, EntityTooLarge, SlowDown, SignatureDoesNotMatch).

#include "broker/checkpoints/s3_credentials.h"
#include "broker/checkpoints/s3_errors.h"
#include "broker/checkpoints/s3_xml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace paddock::checkpoints::s3 {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// ---- XML

constexpr const char *kTwoObjectsTruncated = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
<KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>
<Contents><Key>p/a&amp;b&lt;c&gt;&quot;&apos;</Key><LastModified>2026-12-03T14:51:12.000Z</LastModified>
<ETag>&quot;5d41&quot;</ETag><Size>5</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/&#x41;&#66;&#xE9;</Key><LastModified>1970-01-01T00:00:01.5Z</LastModified><Size>0</Size></Contents>
<NextContinuationToken>1u+/x==&amp;</NextContinuationToken></ListBucketResult>)";

TEST(S3Xml, ListPageDecodesEscapedKeysSizesAndTimes)
{
    const auto page = parseListPage(kTwoObjectsTruncated);
    ASSERT_TRUE(page) << page.error().message;
    ASSERT_EQ(page->objects.size(), 2u);
    EXPECT_EQ(page->objects[0].key, "p/a&b<c>\"'");
    EXPECT_EQ(page->objects[0].size, 5);
    EXPECT_EQ(page->objects[0].modifiedUnixMs, 1796309472000);
    EXPECT_EQ(page->objects[1].key, "p/AB\xC3\xA9");
    EXPECT_EQ(page->objects[1].size, 0);
    EXPECT_EQ(page->objects[1].modifiedUnixMs, 1500);
    EXPECT_TRUE(page->truncated);
    EXPECT_EQ(page->nextContinuationToken, "1u+/x==&");
}

TEST(S3Xml, LastPageNeedsNoToken)
{
    const auto page = parseListPage("<ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
                                    "</ListBucketResult>");
    ASSERT_TRUE(page) << page.error().message;
    EXPECT_TRUE(page->objects.empty());
    EXPECT_FALSE(page->truncated);
}

TEST(S3Xml, UnreadablePagesAreRefusedNotGuessed)
{
    // Truncated without a token would loop or stop early; a bad entity or markup in a key is not a key.
    EXPECT_FALSE(parseListPage("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"));
    EXPECT_FALSE(parseListPage("<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"
                               "<IsTruncated>false</IsTruncated></ListBucketResult>"));
    EXPECT_FALSE(parseListPage("<ListBucketResult><Contents><Key><![CDATA[a]]></Key><Size>1</Size></Contents>"
                               "<IsTruncated>false</IsTruncated></ListBucketResult>"));
    EXPECT_FALSE(parseListPage("<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents>"
                               "<IsTruncated>false</IsTruncated></ListBucketResult>"));
    EXPECT_FALSE(parseListPage("<ListBucketResult><Contents><Key>a</Key></Contents>"
                               "<IsTruncated>false</IsTruncated></ListBucketResult>"));
    EXPECT_FALSE(parseListPage("<Error><Code>NoSuchBucket</Code></Error>"));
    EXPECT_FALSE(xmlText("&#0;"));
    EXPECT_FALSE(xmlText("&#xD800;"));
    EXPECT_FALSE(xmlText("a & b"));
}

TEST(S3Xml, ErrorBodyGivesCodeAndMessage)
{
    const ErrorBody body = parseErrorBody(R"(<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>a&amp;b</Key></Error>)");
    EXPECT_EQ(body.code, "NoSuchKey");
    EXPECT_EQ(body.message, "The specified key does not exist.");
    EXPECT_EQ(parseErrorBody("").code, "");
    EXPECT_EQ(parseErrorBody("<html>502 Bad Gateway</html>").code, "");
}

TEST(S3Xml, Iso8601)
{
    EXPECT_EQ(parseIso8601Ms("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parseIso8601Ms("2000-02-29T12:00:00.123456Z"), 951825600123);
    EXPECT_FALSE(parseIso8601Ms("2001-02-29T12:00:00Z"));
    EXPECT_FALSE(parseIso8601Ms("2001-02-28 12:00:00Z"));
    EXPECT_FALSE(parseIso8601Ms("2001-02-28T12:00:00+01:00"));
}

// ---- credentials

class S3CredentialsFile : public ::testing::Test {
protected:
    void SetUp() override
    {
        char dir[] = "/tmp/paddock-s3-credentials-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        m_dir = dir;
    }
    void TearDown() override { fs::remove_all(m_dir); }

    fs::path write(const std::string &text, fs::perms mode)
    {
        const fs::path file = m_dir / "credentials";
        std::ofstream(file) << text;
        fs::permissions(file, mode);
        return file;
    }

    fs::path m_dir;
};

TEST_F(S3CredentialsFile, ReadsTheDefaultSection)
{
    const fs::path file = write("# team bucket\n[other]\naws_access_key_id = WRONG\n\n[default]\n"
                                "aws_access_key_id = AKIA1\r\naws_secret_access_key=s/e+c=ret \n"
                                "; a comment\naws_session_token = tok\n[next]\naws_secret_access_key = WRONG\n",
                                fs::perms::owner_read | fs::perms::owner_write);
    const auto credentials = readCredentialsFile(file);
    ASSERT_TRUE(credentials) << credentials.error().message;
    EXPECT_EQ(credentials->accessKeyId, "AKIA1");
    EXPECT_EQ(credentials->secretAccessKey, "s/e+c=ret");
    EXPECT_EQ(credentials->sessionToken, "tok");
}

TEST_F(S3CredentialsFile, ReadableByOthersIsRefusedWithTheChmodFix)
{
    const fs::path file = write("[default]\naws_access_key_id = a\naws_secret_access_key = b\n",
                                fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read
                                    | fs::perms::others_read);
    const auto credentials = readCredentialsFile(file);
    ASSERT_FALSE(credentials);
    EXPECT_EQ(credentials.error().code, ErrorCode::FailedPrecondition);
    EXPECT_THAT(credentials.error().message, HasSubstr("0644"));
    EXPECT_THAT(credentials.error().message, HasSubstr("chmod 600 " + file.string()));
}

TEST_F(S3CredentialsFile, MissingFileOrKeysNameTheFileAndWhatIsMissing)
{
    const auto missing = readCredentialsFile(m_dir / "nope");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(missing.error().message, HasSubstr((m_dir / "nope").string()));

    const fs::path noSecret = write("[default]\naws_access_key_id = a\n", fs::perms::owner_read);
    const auto partial = readCredentialsFile(noSecret);
    ASSERT_FALSE(partial);
    EXPECT_EQ(partial.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(partial.error().message, HasSubstr("aws_secret_access_key"));
    EXPECT_THAT(partial.error().message, HasSubstr(noSecret.string()));
    EXPECT_THAT(partial.error().message, ::testing::Not(HasSubstr("aws_access_key_id")));

    const fs::path noSection = write("aws_access_key_id = a\naws_secret_access_key = b\n", fs::perms::owner_read);
    const auto sectionless = readCredentialsFile(noSection);
    ASSERT_FALSE(sectionless);
    EXPECT_EQ(sectionless.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(sectionless.error().message, HasSubstr("[default]"));
}

// ---- errors

CallContext context()
{
    return {"s3 bucket b at http://h:9", "put of 'chunks/a'", "b", "http://h:9", "/etc/paddock/s3-credentials", 500, 1};
}

Error answered(long status, const std::string &code)
{
    return errorForAnswer(context(), status, {code, "words"});
}

TEST(S3Errors, AnswersMapToTheBlobStoreContract)
{
    EXPECT_EQ(answered(404, "NoSuchKey").code, ErrorCode::NotFound);
    EXPECT_EQ(answered(404, "").code, ErrorCode::NotFound);
    EXPECT_EQ(answered(403, "SignatureDoesNotMatch").code, ErrorCode::PermissionDenied);
    EXPECT_EQ(answered(403, "InvalidAccessKeyId").code, ErrorCode::PermissionDenied);
    EXPECT_EQ(answered(403, "").code, ErrorCode::PermissionDenied);
    EXPECT_EQ(answered(507, "").code, ErrorCode::ResourceExhausted);
    EXPECT_EQ(answered(400, "EntityTooLarge").code, ErrorCode::ResourceExhausted);
    EXPECT_EQ(answered(403, "QuotaExceeded").code, ErrorCode::ResourceExhausted);
    EXPECT_EQ(answered(507, "XMinioStorageFull").code, ErrorCode::ResourceExhausted);
    EXPECT_EQ(answered(503, "SlowDown").code, ErrorCode::Unavailable);
    EXPECT_EQ(answered(500, "InternalError").code, ErrorCode::Unavailable);
    EXPECT_EQ(answered(502, "").code, ErrorCode::Unavailable);
    EXPECT_EQ(answered(404, "NoSuchBucket").code, ErrorCode::FailedPrecondition);
    EXPECT_EQ(answered(400, "AuthorizationHeaderMalformed").code, ErrorCode::FailedPrecondition);
    EXPECT_EQ(answered(403, "RequestTimeTooSkewed").code, ErrorCode::FailedPrecondition);
    EXPECT_EQ(answered(400, "InvalidArgument").code, ErrorCode::Internal);
}

TEST(S3Errors, MessagesNameStoreKeyCauseAndFix)
{
    const Error denied = answered(403, "SignatureDoesNotMatch");
    EXPECT_THAT(denied.message, HasSubstr("s3 bucket b at http://h:9: put of 'chunks/a'"));
    EXPECT_THAT(denied.message, HasSubstr("SignatureDoesNotMatch"));
    EXPECT_THAT(denied.message, HasSubstr("check the credentials file /etc/paddock/s3-credentials"));

    const Error bucket = answered(404, "NoSuchBucket");
    EXPECT_THAT(bucket.message, HasSubstr("bucket 'b' does not exist"));
    EXPECT_THAT(bucket.message, HasSubstr("aws s3 mb s3://b --endpoint-url http://h:9"));

    HttpResponse timedOut{Transport::TimedOut, "Operation timed out", 0, "", ""};
    const Error late = errorForTransport(context(), timedOut);
    EXPECT_EQ(late.code, ErrorCode::Unavailable);
    EXPECT_THAT(late.message, HasSubstr("timed out after 500 ms"));
    EXPECT_THAT(late.message, HasSubstr("http://h:9"));
}

TEST(S3Errors, RetryOnlyWhatMaySucceedAgain)
{
    EXPECT_TRUE(isRetryable({Transport::Ok, "", 503, "", ""}));
    EXPECT_TRUE(isRetryable({Transport::Ok, "", 500, "", ""}));
    EXPECT_TRUE(isRetryable({Transport::Ok, "", 429, "", ""}));
    EXPECT_TRUE(isRetryable({Transport::Refused, "", 0, "", ""}));
    EXPECT_TRUE(isRetryable({Transport::Broken, "", 0, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::Ok, "", 507, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::Ok, "", 501, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::Ok, "", 404, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::Ok, "", 403, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::TimedOut, "", 0, "", ""}));
    EXPECT_FALSE(isRetryable({Transport::Tls, "", 0, "", ""}));

    EXPECT_EQ(retryAfterMs({Transport::Ok, "", 503, "", "2"}), 2000);
    EXPECT_EQ(retryAfterMs({Transport::Ok, "", 503, "", "Wed, 21 Oct 2015 07:28:00 GMT"}), std::nullopt);
    EXPECT_EQ(retryAfterMs({Transport::Ok, "", 503, "", ""}), std::nullopt);
}

} // namespace
} // namespace paddock::checkpoints::s3
