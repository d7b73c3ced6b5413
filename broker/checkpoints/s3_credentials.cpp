#include "broker/checkpoints/s3_credentials.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace paddock::checkpoints::s3 {

namespace {

constexpr std::string_view kSection = "default";

std::string_view trimmed(std::string_view text)
{
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos)
        return {};
    const auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

std::string octalMode(mode_t mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

// The name = value pairs of the [default] section; later duplicates win, as in the AWS CLI.
std::map<std::string, std::string, std::less<>> defaultSection(std::string_view text, bool &sawSection)
{
    std::map<std::string, std::string, std::less<>> values;
    bool inSection = false;
    sawSection = false;
    while (!text.empty()) {
        const auto end = text.find('\n');
        const std::string_view line = trimmed(text.substr(0, end));
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        if (line.empty() || line.front() == '#' || line.front() == ';')
            continue;
        if (line.front() == '[' && line.back() == ']') {
            inSection = trimmed(line.substr(1, line.size() - 2)) == kSection;
            sawSection = sawSection || inSection;
            continue;
        }
        const auto equals = line.find('=');
        if (!inSection || equals == std::string_view::npos)
            continue;
        values[std::string(trimmed(line.substr(0, equals)))] = std::string(trimmed(line.substr(equals + 1)));
    }
    return values;
}

} // namespace

Result<Credentials> parseCredentials(std::string_view text, const std::filesystem::path &file)
{
    bool sawSection = false;
    const auto values = defaultSection(text, sawSection);
    if (!sawSection)
        return fail(ErrorCode::InvalidArgument,
                    "S3 credentials file " + file.string()
                        + " has no [default] section; add one holding aws_access_key_id and aws_secret_access_key");

    std::string missing;
    for (const char *name : {"aws_access_key_id", "aws_secret_access_key"}) {
        const auto it = values.find(name);
        if (it == values.end() || it->second.empty())
            missing += (missing.empty() ? "" : " and ") + std::string(name);
    }
    if (!missing.empty())
        return fail(ErrorCode::InvalidArgument, "S3 credentials file " + file.string() + " has no " + missing
                                                    + " in its [default] section; add it (name = value)");

    Credentials credentials;
    credentials.accessKeyId = values.find("aws_access_key_id")->second;
    credentials.secretAccessKey = values.find("aws_secret_access_key")->second;
    if (const auto token = values.find("aws_session_token"); token != values.end())
        credentials.sessionToken = token->second;
    return credentials;
}

Result<Credentials> readCredentialsFile(const std::filesystem::path &file)
{
    if (file.empty())
        return fail(ErrorCode::InvalidArgument,
                    "no S3 credentials file is configured; name one holding a [default] section with "
                    "aws_access_key_id and aws_secret_access_key");
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) {
        const int error = errno;
        return fail(ErrorCode::InvalidArgument,
                    "cannot read the S3 credentials file " + file.string() + ": " + std::strerror(error)
                        + "; create it with a [default] section holding aws_access_key_id and "
                          "aws_secret_access_key, mode 0600");
    }
    if (!S_ISREG(info.st_mode))
        return fail(ErrorCode::InvalidArgument,
                    "S3 credentials file " + file.string() + " is not a regular file; name the file itself");
    if ((info.st_mode & 077) != 0)
        return fail(ErrorCode::FailedPrecondition,
                    "S3 credentials file " + file.string() + " has mode " + octalMode(info.st_mode)
                        + ", which lets group or others read or change the secret; run `chmod 600 "
                        + file.string() + "`");

    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    if (in.is_open())
        text << in.rdbuf();
    if (!in.is_open() || in.bad())
        return fail(ErrorCode::InvalidArgument, "cannot read the S3 credentials file " + file.string()
                                                    + "; check that it is a readable file");
    return parseCredentials(text.str(), file);
}

} // namespace paddock::checkpoints::s3
