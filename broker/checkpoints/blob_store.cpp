#include "broker/checkpoints/blob_store.h"

namespace paddock::checkpoints {

std::string blobKeyProblem(std::string_view key)
{
    if (key.empty())
        return "is empty";
    if (key.size() > 512)
        return "is longer than 512 bytes";
    if (key.front() == '/')
        return "starts with '/'";
    for (char c : key)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '/' || c == '-'))
            return "holds a character outside [a-z0-9._/-]";
    size_t start = 0;
    while (start <= key.size()) {
        const size_t end = std::min(key.find('/', start), key.size());
        const std::string_view part = key.substr(start, end - start);
        if (part.empty() || part == "." || part == "..")
            return "has an empty, '.' or '..' component";
        start = end + 1;
    }
    return {};
}

} // namespace paddock::checkpoints
