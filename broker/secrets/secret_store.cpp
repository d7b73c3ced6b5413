#include "broker/secrets/secret_store.h"

#include "common/paths.h"

#include <openssl/evp.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::secrets {

namespace {

bool isUtf8(const std::string &s)
{
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = 0;
        if (c < 0x80) n = 0;
        else if ((c & 0xE0) == 0xC0 && c >= 0xC2) n = 1;
        else if ((c & 0xF0) == 0xE0) n = 2;
        else if ((c & 0xF8) == 0xF0 && c <= 0xF4) n = 3;
        else return false;
        if (n > 0 && i + n >= s.size())
            return false;   // a sequence cut short
        for (size_t k = 1; k <= n; ++k) {
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
                return false;
        }
        i += n + 1;
    }
    return true;
}

std::string modeText(mode_t mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "0%03o", static_cast<unsigned>(mode & 0777));
    return text;
}

std::string errnoText()
{
    return std::strerror(errno);
}

bool writeAll(int fd, const std::string &data)
{
    size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

} // namespace

Status validateSecretName(const std::string &name)
{
    const auto bad = [&](const std::string &why) {
        return fail(ErrorCode::InvalidArgument, "secret name '" + name + "' " + why);
    };
    if (name.empty())
        return fail(ErrorCode::InvalidArgument, "no secret name given: name it like an environment variable, e.g. "
                                                "GITHUB_TOKEN");
    if (name.size() > 128)
        return bad("is longer than 128 characters; pick a shorter name");
    const auto first = static_cast<unsigned char>(name[0]);
    if (!(std::isalpha(first) || first == '_'))
        return bad("must start with a letter or '_': it becomes an environment variable (e.g. GITHUB_TOKEN)");
    for (unsigned char c : name) {
        if (!(std::isalnum(c) || c == '_'))
            return bad("may hold only letters, digits and '_': it becomes an environment variable (e.g. GITHUB_TOKEN)");
    }
    if (name == "PATH" || name == "HOME" || name == "LANG")
        return bad("is set by the sandbox itself; pick another name");
    return {};
}

Status validateSecretValue(const std::string &name, const std::string &value)
{
    if (value.size() < kMinSecretBytes)
        return fail(ErrorCode::InvalidArgument,
                    "the value of secret '" + name + "' is " + std::to_string(value.size()) + " bytes; a secret needs at "
                        "least " + std::to_string(kMinSecretBytes) + " (shorter ones would be redacted out of ordinary "
                        "output everywhere)");
    if (value.size() > kMaxSecretBytes)
        return fail(ErrorCode::InvalidArgument, "the value of secret '" + name + "' is " + std::to_string(value.size())
                                                    + " bytes; at most " + std::to_string(kMaxSecretBytes) + " are kept");
    if (value.find('\0') != std::string::npos)
        return fail(ErrorCode::InvalidArgument, "the value of secret '" + name + "' holds a NUL byte, which an "
                                                "environment variable cannot; store it base64-encoded");
    if (!isUtf8(value))
        return fail(ErrorCode::InvalidArgument, "the value of secret '" + name + "' is not UTF-8 text; store it "
                                                "base64-encoded");
    return {};
}

std::string fingerprint(const std::string &value)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(value.data(), value.size(), digest, &length, EVP_sha256(), nullptr);
    static const char *digits = "0123456789abcdef";
    std::string out = "sha256:";
    for (unsigned i = 0; i < 6 && i < length; ++i) {
        out += digits[digest[i] >> 4];
        out += digits[digest[i] & 15];
    }
    return out;
}

Result<std::map<std::string, std::string>> readSecretsFile(const std::filesystem::path &file)
{
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return std::map<std::string, std::string>{};
        if (errno == ELOOP)
            return fail(ErrorCode::FailedPrecondition, "secrets file " + file.string() + " is a symbolic link; "
                                                       "replace it with the file itself (mode 0600)");
        return fail(ErrorCode::FailedPrecondition, "cannot open secrets file " + file.string() + ": " + errnoText()
                                                       + "; check its owner and permissions (it must be 0600)");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return fail(ErrorCode::FailedPrecondition, "cannot stat secrets file " + file.string() + ": " + errnoText());
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(ErrorCode::FailedPrecondition, "secrets file " + file.string() + " is not a regular file; "
                                                   "move it away and set secrets with `paddockctl secrets set`");
    }
    // Like ssh with a private key: a file others may read is not used at all.
    if ((st.st_mode & 077) != 0) {
        ::close(fd);
        return fail(ErrorCode::FailedPrecondition,
                    "secrets file " + file.string() + " has mode " + modeText(st.st_mode)
                        + ", so users other than its owner may read or change it; it must be 0600: run `chmod 600 "
                        + file.string() + "` (and rotate any secret others may have read)");
    }
    if (st.st_uid != ::geteuid()) {
        ::close(fd);
        return fail(ErrorCode::FailedPrecondition,
                    "secrets file " + file.string() + " is owned by uid " + std::to_string(st.st_uid)
                        + ", not by the user paddockd runs as (uid " + std::to_string(::geteuid()) + "): run `chown "
                        + std::to_string(::geteuid()) + " " + file.string() + "` or run paddockd as its owner");
    }
    std::string text;
    char buffer[65536];
    while (true) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ::close(fd);
            return fail(ErrorCode::FailedPrecondition, "cannot read secrets file " + file.string() + ": " + errnoText());
        }
        if (n == 0)
            break;
        text.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);

    toml::table table;
    try {
        table = toml::parse(text, file.string());
    } catch (const toml::parse_error &e) {
        return fail(ErrorCode::InvalidArgument, file.string() + ":" + std::to_string(e.source().begin.line) + ": "
                                                    + std::string(e.description()) + ": fix the TOML syntax there");
    }
    std::map<std::string, std::string> values;
    for (const auto &[key, node] : table) {
        const std::string where = file.string() + ":" + std::to_string(node.source().begin.line);
        if (key.str() != "secrets")
            return fail(ErrorCode::InvalidArgument, where + ": unknown key '" + std::string(key.str())
                                                        + "'; the file holds one [secrets] table of NAME = \"value\"");
        const auto *secrets = node.as_table();
        if (!secrets)
            return fail(ErrorCode::InvalidArgument, where + ": secrets must be a table: [secrets] then NAME = \"value\"");
        for (const auto &[name, value] : *secrets) {
            const std::string at = file.string() + ":" + std::to_string(value.source().begin.line);
            const auto text_ = value.value<std::string>();
            if (!text_)
                return fail(ErrorCode::InvalidArgument, at + ": secret '" + std::string(name.str())
                                                            + "' must be a string: NAME = \"value\"");
            const std::string nameText(name.str());
            if (auto ok = validateSecretName(nameText); !ok)
                return fail(ErrorCode::InvalidArgument, at + ": " + ok.error().message);
            if (auto ok = validateSecretValue(nameText, *text_); !ok)
                return fail(ErrorCode::InvalidArgument, at + ": " + ok.error().message);
            values[nameText] = *text_;
        }
    }
    return values;
}

Status writeSecretsFile(const std::filesystem::path &file, const std::map<std::string, std::string> &values)
{
    const auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        if (auto error = ensurePrivateDirectory(dir); !error.empty())
            return fail(ErrorCode::FailedPrecondition, error);
    }
    toml::table secrets;
    for (const auto &[name, value] : values)
        secrets.insert(name, value);
    toml::table root;
    root.insert("secrets", std::move(secrets));
    std::ostringstream text;
    text << "# paddockd secrets: keep this file mode 0600. Managed with `paddockctl secrets`.\n" << root << "\n";

    thread_local std::mt19937_64 random{std::random_device{}()};
    const auto temp = dir / ("." + file.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-"
                             + std::to_string(random() % 1000000000));
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(ErrorCode::FailedPrecondition, "cannot write secrets file in " + dir.string() + ": " + errnoText()
                                                       + "; check that the directory is writable");
    const bool written = writeAll(fd, text.str()) && ::fsync(fd) == 0;
    const int savedErrno = errno;
    ::close(fd);
    if (!written || ::rename(temp.c_str(), file.c_str()) != 0) {
        const std::string why = std::strerror(written ? errno : savedErrno);
        ::unlink(temp.c_str());
        return fail(ErrorCode::Internal, "cannot write secrets file " + file.string() + ": " + why
                                             + "; the previous file is unchanged");
    }
    if (const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dirFd >= 0) {
        ::fsync(dirFd);
        ::close(dirFd);
    }
    return {};
}

SecretStore::SecretStore(std::filesystem::path file, std::map<std::string, std::string> values)
    : m_file(std::move(file))
{
    publish(std::move(values));
}

Result<std::unique_ptr<SecretStore>> SecretStore::open(const std::filesystem::path &file)
{
    auto values = readSecretsFile(file);
    if (!values)
        return std::unexpected(values.error());
    return std::unique_ptr<SecretStore>(new SecretStore(file, std::move(*values)));
}

void SecretStore::publish(std::map<std::string, std::string> values)
{
    std::vector<Secret> list;
    for (const auto &[name, value] : values)
        list.push_back({name, value});
    auto snapshot = std::make_shared<SecretsSnapshot>();
    snapshot->redactor = Redactor(list);
    snapshot->values = std::move(values);
    std::lock_guard lock(m_snapshotMutex);
    m_snapshot = std::move(snapshot);
}

std::shared_ptr<const SecretsSnapshot> SecretStore::snapshot() const
{
    std::lock_guard lock(m_snapshotMutex);
    return m_snapshot;
}

std::vector<SecretInfo> SecretStore::list() const
{
    std::vector<SecretInfo> out;
    for (const auto &[name, value] : snapshot()->values)
        out.push_back({name, fingerprint(value)});
    return out;
}

Result<bool> SecretStore::set(const std::string &name, const std::string &value)
{
    if (auto ok = validateSecretName(name); !ok)
        return std::unexpected(ok.error());
    if (auto ok = validateSecretValue(name, value); !ok)
        return std::unexpected(ok.error());
    std::lock_guard lock(m_writeMutex);
    auto values = snapshot()->values;
    const bool replaced = values.contains(name);
    values[name] = value;
    if (auto written = writeSecretsFile(m_file, values); !written)
        return std::unexpected(written.error());
    publish(std::move(values));
    return replaced;
}

Status SecretStore::remove(const std::string &name)
{
    std::lock_guard lock(m_writeMutex);
    auto values = snapshot()->values;
    if (values.erase(name) == 0)
        return fail(ErrorCode::NotFound, "no secret named '" + name + "' on this broker; `paddockctl secrets ls` lists them");
    if (auto written = writeSecretsFile(m_file, values); !written)
        return written;
    publish(std::move(values));
    return {};
}

std::vector<std::string> SecretStore::unknown(const std::vector<std::string> &names) const
{
    const auto current = snapshot();
    std::vector<std::string> out;
    for (const auto &name : names) {
        if (!current->values.contains(name))
            out.push_back(name);
    }
    return out;
}

} // namespace paddock::secrets
