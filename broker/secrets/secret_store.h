#pragma once
// The broker's named secrets: a TOML file in its config directory (secrets.toml next to
// broker.toml), mode 0600, owned by the user paddockd runs as, rewritten atomically on each change.
// A session granted a secret by name gets its value in the environment of its commands; every
// recorded output is redacted for every value this store holds (redactor.h).
//
// File format, as written by the broker (hand edits are read the same way):
//
//   # paddockd secrets: keep this file mode 0600. Managed with `paddockctl secrets`.
//   [secrets]
//   GITHUB_TOKEN = "ghp_..."
//
// Threads: every method may be called from any thread. Changes are serialised by a mutex; readers
// take snapshot(), an immutable view (values and the redactor built for them) that stays valid for
// as long as they hold it, so a step in progress keeps one consistent set.

#include "broker/secrets/redactor.h"
#include "common/result.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::secrets {

inline constexpr size_t kMaxSecretBytes = 64 * 1024;
inline constexpr const char *kSecretsFileName = "secrets.toml";

struct SecretInfo {
    std::string name;
    std::string fingerprint;   // "sha256:" and the first 12 hex digits of the value's SHA-256
};

struct SecretsSnapshot {
    std::map<std::string, std::string> values;
    Redactor redactor;
};

// Checks a secret's name: an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128
// characters) that the sandbox does not set itself (PATH, HOME, LANG).
Status validateSecretName(const std::string &name);
// Checks a value: at least kMinSecretBytes (shorter ones would redact ordinary text), at most
// kMaxSecretBytes, UTF-8 (the file is TOML), no NUL byte (it goes into an environment).
Status validateSecretValue(const std::string &name, const std::string &value);

std::string fingerprint(const std::string &value);

// Reads the file. A file that does not exist holds no secrets. Refused (FailedPrecondition, with the
// fix named): a mode that lets anyone but its owner read or write it, an owner other than this
// process's user, something that is not a regular file. InvalidArgument: bad TOML, bad names or
// values (file and line named).
Result<std::map<std::string, std::string>> readSecretsFile(const std::filesystem::path &file);
// Writes the file atomically (a 0600 temporary in the same directory, fsync, rename, fsync of the
// directory); creates the directory 0700 when missing.
Status writeSecretsFile(const std::filesystem::path &file, const std::map<std::string, std::string> &values);

class SecretStore {
public:
    static Result<std::unique_ptr<SecretStore>> open(const std::filesystem::path &file);

    const std::filesystem::path &file() const { return m_file; }
    std::shared_ptr<const SecretsSnapshot> snapshot() const;

    std::vector<SecretInfo> list() const;
    // Adds or replaces. Returns true when it replaced an existing value.
    Result<bool> set(const std::string &name, const std::string &value);
    // NotFound when there is no such secret.
    Status remove(const std::string &name);
    // The names among `names` that the store does not hold, in the order given.
    std::vector<std::string> unknown(const std::vector<std::string> &names) const;

private:
    SecretStore(std::filesystem::path file, std::map<std::string, std::string> values);
    void publish(std::map<std::string, std::string> values);   // under m_writeMutex

    std::filesystem::path m_file;
    mutable std::mutex m_writeMutex;     // one change at a time: file and snapshot move together
    mutable std::mutex m_snapshotMutex;  // guards m_snapshot (the pointer, not what it points to)
    std::shared_ptr<const SecretsSnapshot> m_snapshot;
};

} // namespace paddock::secrets
