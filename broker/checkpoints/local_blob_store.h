#pragma once
// The embedded default checkpoint store: one file per key under a directory the broker owns
// (default <data_dir>/checkpoints). A put writes a temporary file, fsyncs it, renames it over the
// key and fsyncs the directory, so a key either holds all its bytes or does not exist, even after a
// power cut.
//
// Threads: every method may be called from any thread concurrently; two puts of one key race only
// to write the same content (keys name content), and the rename keeps either whole.

#include "broker/checkpoints/blob_store.h"

#include <filesystem>
#include <memory>

namespace paddock::checkpoints {

class LocalBlobStore final : public BlobStore {
public:
    // Creates dir (0700) if needed. FailedPrecondition when it cannot be made or written.
    static Result<std::unique_ptr<LocalBlobStore>> open(std::filesystem::path dir);

    std::string describe() const override;
    Status put(const std::string &key, std::string_view bytes) override;
    Result<std::string> get(const std::string &key) override;
    Result<bool> exists(const std::string &key) override;
    Result<std::vector<BlobInfo>> list(const std::string &prefix) override;
    Status remove(const std::string &key) override;

    const std::filesystem::path &dir() const { return m_dir; }

private:
    explicit LocalBlobStore(std::filesystem::path dir) : m_dir(std::move(dir)) {}
    Result<std::filesystem::path> pathOf(const std::string &key) const;
    std::unexpected<Error> ioError(const std::string &what, const std::string &key, int error) const;

    const std::filesystem::path m_dir;
};

} // namespace paddock::checkpoints
