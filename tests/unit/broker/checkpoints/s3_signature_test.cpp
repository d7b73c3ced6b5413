// SigV4 signing (broker/checkpoints/s3_signature.h) against AWS's published examples: the four
// worked examples of the S3 API reference ("Signature Calculations for the Authorization Header",
// credentials AKIAIOSFODNN7EXAMPLE) and cases of the general SigV4 test suite (get-vanilla and
// friends, credentials AKIDEXAMPLE). s3rver does not check signatures, so these are what does.

#include "broker/checkpoints/s3_signature.h"
#include "checkpoint/sha256.h"

#include <gtest/gtest.h>

namespace paddock::checkpoints::s3 {
namespace {

constexpr const char *kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

const Credentials kS3Example{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const Credentials kSuiteExample{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};

constexpr const char *kS3Date = "20130524T000000Z";
constexpr const char *kS3Host = "examplebucket.s3.amazonaws.com";
constexpr const char *kSuiteDate = "20150830T123600Z";

Signature signS3Example(SigningInput input)
{
    return signRequest(input, kS3Example, "us-east-1", "s3", kS3Date);
}

TEST(S3Signature, AwsGetObjectExample)
{
    const Signature s = signS3Example({"GET", "/test.txt", {},
                                       {{"Host", kS3Host}, {"Range", "bytes=0-9"},
                                        {"x-amz-content-sha256", kEmptySha256}, {"x-amz-date", kS3Date}},
                                       kEmptySha256});
    EXPECT_EQ(s.canonicalRequest, std::string("GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
                                              "range:bytes=0-9\nx-amz-content-sha256:")
                                      + kEmptySha256 + "\nx-amz-date:20130524T000000Z\n\n"
                                      + "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
    EXPECT_EQ(s.stringToSign, "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                              "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    EXPECT_EQ(s.authorization,
              "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
              "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
              "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3Signature, AwsPutObjectExampleEncodesTheDollarOfTheKey)
{
    const std::string payloadHash = checkpoint::sha256Hex("Welcome to Amazon S3.");
    ASSERT_EQ(payloadHash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    const Signature s = signS3Example({"PUT", "/test$file.text", {},
                                       {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"Host", kS3Host},
                                        {"x-amz-date", kS3Date}, {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                                        {"x-amz-content-sha256", payloadHash}},
                                       payloadHash});
    EXPECT_EQ(s.canonicalRequest.substr(0, s.canonicalRequest.find('\n', 4) + 1), "PUT\n/test%24file.text\n");
    EXPECT_EQ(s.signedHeaders, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
    EXPECT_EQ(s.stringToSign.substr(s.stringToSign.rfind('\n') + 1),
              "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
    EXPECT_EQ(s.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(S3Signature, AwsListObjectsExampleSortsTheQuery)
{
    // Given in the other order: the canonical query sorts it.
    const Signature s = signS3Example({"GET", "/", {{"prefix", "J"}, {"max-keys", "2"}},
                                       {{"Host", kS3Host}, {"x-amz-date", kS3Date},
                                        {"x-amz-content-sha256", kEmptySha256}},
                                       kEmptySha256});
    EXPECT_EQ(s.canonicalRequest.substr(0, s.canonicalRequest.find("host:")), "GET\n/\nmax-keys=2&prefix=J\n");
    EXPECT_EQ(s.stringToSign.substr(s.stringToSign.rfind('\n') + 1),
              "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
    EXPECT_EQ(s.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3Signature, AwsGetBucketLifecycleExampleSignsABareFlagWithAnEmptyValue)
{
    const Signature s = signS3Example({"GET", "/", {{"lifecycle", ""}},
                                       {{"Host", kS3Host}, {"x-amz-date", kS3Date},
                                        {"x-amz-content-sha256", kEmptySha256}},
                                       kEmptySha256});
    EXPECT_NE(s.canonicalRequest.find("\n/\nlifecycle=\nhost:"), std::string::npos) << s.canonicalRequest;
    EXPECT_EQ(s.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(S3Signature, SuiteGetVanilla)
{
    const Signature s = signRequest({"GET", "/", {}, {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kSuiteDate}},
                                     kEmptySha256},
                                    kSuiteExample, "us-east-1", "service", kSuiteDate);
    EXPECT_EQ(s.canonicalRequest, std::string("GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                                              "host;x-amz-date\n")
                                      + kEmptySha256);
    EXPECT_EQ(s.stringToSign, "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                              "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
    EXPECT_EQ(s.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    EXPECT_EQ(s.authorization, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                               "SignedHeaders=host;x-amz-date, "
                               "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(S3Signature, SuiteGetVanillaEmptyQueryKey)
{
    const Signature s = signRequest({"GET", "/", {{"Param1", "value1"}},
                                     {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kSuiteDate}}, kEmptySha256},
                                    kSuiteExample, "us-east-1", "service", kSuiteDate);
    EXPECT_EQ(s.signature, "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb");
}

TEST(S3Signature, SuitePostWithSessionTokenSignsTheToken)
{
    const std::string token =
        "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYR"
        "qTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HF"
        "vlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rv"
        "x3iSIlTJabIQwj2ICCR/oLxBA==";
    const Signature s = signRequest({"POST", "/", {},
                                     {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kSuiteDate},
                                      {"X-Amz-Security-Token", token}},
                                     kEmptySha256},
                                    kSuiteExample, "us-east-1", "service", kSuiteDate);
    EXPECT_EQ(s.signedHeaders, "host;x-amz-date;x-amz-security-token");
    EXPECT_EQ(s.stringToSign.substr(s.stringToSign.rfind('\n') + 1),
              "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6");
    EXPECT_EQ(s.signature, "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead");
}

TEST(S3Signature, SuiteGetUtf8EncodesEachByteOnce)
{
    const Signature s = signRequest({"GET", "/\xE1\x88\xB4", {},
                                     {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kSuiteDate}}, kEmptySha256},
                                    kSuiteExample, "us-east-1", "service", kSuiteDate);
    EXPECT_TRUE(s.canonicalRequest.starts_with("GET\n/%E1%88%B4\n\n")) << s.canonicalRequest;
}

TEST(S3Signature, HeaderValuesAreTrimmedAndJoined)
{
    const Signature s = signRequest({"GET", "/", {},
                                     {{"Host", "h"}, {"My-Header", "  a   b  "}, {"my-header", "c"},
                                      {"X-Amz-Date", kSuiteDate}},
                                     kEmptySha256},
                                    kSuiteExample, "us-east-1", "service", kSuiteDate);
    EXPECT_NE(s.canonicalRequest.find("\nmy-header:a b,c\n"), std::string::npos) << s.canonicalRequest;
    EXPECT_EQ(s.signedHeaders, "host;my-header;x-amz-date");
}

TEST(S3Signature, UriEncodingKeepsOnlyTheUnreservedCharacters)
{
    // The characters checkpoint keys use need no encoding; '/' stays in paths only.
    EXPECT_EQ(uriEncode("chunks/ab/a-b.c_d~e", true), "chunks/ab/a-b.c_d~e");
    EXPECT_EQ(uriEncode("chunks/ab", false), "chunks%2Fab");
    EXPECT_EQ(uriEncode("a b+c=d&e$f%", true), "a%20b%2Bc%3Dd%26e%24f%25");
    EXPECT_EQ(uriEncode("\xC3\xA9", true), "%C3%A9");
    EXPECT_EQ(uriEncode(std::string("\0z", 2), true), "%00z");
}

TEST(S3Signature, CanonicalQueryEncodesTokensThatLookLikeBase64)
{
    EXPECT_EQ(canonicalQuery({{"list-type", "2"}, {"continuation-token", "1ab+/c=="}, {"prefix", "p/q r"}}),
              "continuation-token=1ab%2B%2Fc%3D%3D&list-type=2&prefix=p%2Fq%20r");
}

TEST(S3Signature, AmzDateIsUtc)
{
    using namespace std::chrono;
    const auto when = sys_days(year(2013) / 5 / 24) + hours(23) + minutes(4) + seconds(5) + milliseconds(999);
    EXPECT_EQ(amzDateOf(when), "20130524T230405Z");
}

} // namespace
} // namespace paddock::checkpoints::s3
