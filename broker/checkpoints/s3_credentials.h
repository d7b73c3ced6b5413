#pragma once
// Reads S3 credentials from an AWS shared-credentials file (the INI that `aws configure` writes):
//
//   [default]
//   aws_access_key_id = AKIA...
//   aws_secret_access_key = ...
//   aws_session_token = ...        (optional)
//
// Only the [default] section is read. A file that group or others may read or write is refused,
// the way ssh refuses a private key: the fix is `chmod 600 FILE`.
//
// Threads: a pure function of the file, callable from any thread.

#include "broker/checkpoints/s3_signature.h"
#include "common/result.h"

#include <filesystem>
#include <string_view>

namespace paddock::checkpoints::s3 {

// InvalidArgument when the file is missing, unreadable or lacks a key (each named);
// FailedPrecondition when its mode lets group or others in.
Result<Credentials> readCredentialsFile(const std::filesystem::path &file);

// The parse alone, for tests: text is the file's content, file names it in messages.
Result<Credentials> parseCredentials(std::string_view text, const std::filesystem::path &file);

} // namespace paddock::checkpoints::s3
