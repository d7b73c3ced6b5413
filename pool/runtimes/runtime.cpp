#include "pool/runtimes/runtime.h"

#include "pool/runtimes/bwrap_runtime.h"
#include "pool/runtimes/crun_runtime.h"
#include "pool/runtimes/runsc_runtime.h"

namespace paddock::pool {
namespace {

template <typename T>
Result<std::unique_ptr<Runtime>> upcast(Result<std::unique_ptr<T>> r)
{
    if (!r)
        return std::unexpected(r.error());
    return std::unique_ptr<Runtime>(std::move(*r));
}

} // namespace

Result<std::unique_ptr<Runtime>> makeRuntime(const std::string &name)
{
    if (name == "bwrap") {
        auto r = BwrapRuntime::create();
        if (!r)   // keep bwrap's own message, but as a start-up precondition like the others
            return fail(ErrorCode::FailedPrecondition, r.error().message);
        return upcast(std::move(r));
    }
    if (name == "runsc")
        return upcast(RunscRuntime::create());
    if (name == "crun")
        return upcast(CrunRuntime::create());
    return fail(ErrorCode::InvalidArgument, "unknown runtime '" + name + "'; known runtimes: bwrap (lite), runsc (gVisor), crun (OCI)");
}

} // namespace paddock::pool
