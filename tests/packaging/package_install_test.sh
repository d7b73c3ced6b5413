#!/usr/bin/env bash
# The Debian packages as a user gets them: builds them with cpack from the build tree, installs
# them with dpkg into a throwaway root (its own empty dpkg database), and runs the installed
# programs from there:
#   - every file of the layout is where docs/install.md says, binaries stripped, units naming
#     /usr/bin, the package relations declared;
#   - paddockctl and paddock --version; paddockd --check-config with the embedded default and with
#     the shipped example broker.toml and its policy.toml, paddock-pool --check-config with the
#     example pool.toml (exit 0), and paddockd's with a broken config (non-zero, naming the key);
#   - the installed paddock-pool finds the installed paddock-sandbox-init, and the installed
#     paddockd finds the installed playbooks: a pool on a free loopback port and a broker using it
#     run a playbook that exists only in the throwaway root, whose one command checks that PID 1 of
#     its sandbox is the init.
# Exits 77 (ctest: skipped) with the reason when cpack or dpkg cannot be used here.
#
# Usage: package_install_test.sh CPACK_COMMAND BUILD_DIR VERSION WITH_CONSOLE(ON|OFF)
set -uo pipefail

cpack=$1 build=$2 version=$3 with_console=$4
deb_version="$version-1"

skip() { echo "SKIPPED: $*" >&2; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }

for tool in "$cpack" dpkg dpkg-deb dpkg-query dpkg-shlibdeps readelf; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (Debian: dpkg, dpkg-dev, binutils, cmake); the packages cannot be built or installed here"
done
[ -f "$build/CPackConfig.cmake" ] || skip "$build/CPackConfig.cmake is missing: configure with cmake first"

tmp=$(mktemp -d /tmp/paddock-package-test.XXXXXX)
chmod 0711 "$tmp"   # the pool's sandbox uids pass through to their workspaces (docs/security.md)
pool_pid='' broker_pid=''
pool_id="pkgtest-$$"
cleanup() {
  for pid in $broker_pid $pool_pid; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  # paddock-pool keeps its cgroup directories (pools of one id share them); this id was ours alone.
  # They are under the pool's own cgroup in each hierarchy, or under the hierarchy's root.
  find /sys/fs/cgroup -maxdepth 8 -type d -path '*/paddock/*' -name "$pool_id" 2>/dev/null | while read -r dir; do
    rmdir "$dir" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- build the packages -----------------------------------------------------------------------
start=$(date +%s%N)
if ! "$cpack" --config "$build/CPackConfig.cmake" -B "$tmp/packages" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack could not build the packages (log above)"
fi
end=$(date +%s%N)
echo "cpack built the packages in $(( (end - start) / 1000000 )) ms:"
packages=(paddock-broker paddock-pool)
[ "$with_console" = ON ] && packages=(paddock "${packages[@]}")
debs=()
for p in "${packages[@]}"; do
  deb=$(ls "$tmp/packages/${p}_${deb_version}_"*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || { ls -l "$tmp/packages" >&2; fail "no package ${p}_${deb_version}_ARCH.deb was built"; }
  echo "  $(basename "$deb"): $(stat -c %s "$deb") bytes"
  debs+=("$deb")
done

field() { dpkg-deb -f "$tmp/packages/${1}_${deb_version}_"*.deb "$2"; }
expect_field() {   # package field substring
  local value
  value=$(field "$1" "$2")
  [[ "$value" == *"$3"* ]] || fail "package $1: $2 is '$value', expected it to contain '$3'"
}
expect_field paddock-broker Recommends "paddock-pool (= $deb_version)"
expect_field paddock-broker Depends "libc6"          # from dpkg-shlibdeps
expect_field paddock-pool Depends "bubblewrap"
expect_field paddock-pool Depends "libc6"
expect_field paddock-pool Depends "libseccomp2"      # the sandbox init loads its filter with it
for r in runsc crun btrfs-progs; do expect_field paddock-pool Recommends "$r"; done
if [ "$with_console" = ON ]; then
  expect_field paddock Depends "paddock-broker (= $deb_version)"
  expect_field paddock Depends "libqt6widgets6"
fi
# An execution host installs paddock-pool alone: it must not need the broker.
[[ "$(field paddock-pool Depends)" != *paddock-broker* ]] || fail "paddock-pool depends on paddock-broker"

# --- install into a throwaway root ------------------------------------------------------------
root=$tmp/root
admin=$root/var/lib/dpkg
mkdir -p "$admin/info" "$admin/updates" "$admin/triggers"
touch "$admin/status" "$admin/available"
if ! dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless --force-not-root \
     --no-triggers -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1; then
  cat "$tmp/dpkg.log" >&2
  if grep -qiE 'requested operation requires superuser|not found in PATH' "$tmp/dpkg.log"; then
    skip "dpkg cannot install into a throwaway root here (log above)"
  fi
  fail "dpkg could not install the packages into $root (log above)"
fi
for p in "${packages[@]}"; do
  status=$(dpkg-query --admindir="$admin" -W -f='${Status}' "$p" 2>&1)
  [ "$status" = "install ok installed" ] || fail "package $p is '$status' after dpkg -i"
done

layout=(
  usr/bin/paddockd usr/bin/paddockctl usr/bin/paddock-pool
  usr/libexec/paddock/paddock-sandbox-init
  usr/share/paddock/playbooks/hello-c.toml usr/share/paddock/playbooks/inspect.toml
  usr/share/paddock/examples/broker.toml usr/share/paddock/examples/policy.toml
  usr/share/paddock/examples/pool.toml usr/share/paddock/examples/paddock-pool.default
  usr/lib/systemd/user/paddockd.service usr/lib/systemd/user/paddock-pool.service
  usr/lib/systemd/system/paddock-pool.service
  usr/share/doc/paddock/README.md usr/share/doc/paddock/docs/install.md usr/share/doc/paddock/docs/security.md
  usr/share/doc/paddock-broker/copyright usr/share/doc/paddock-pool/copyright
)
if [ "$with_console" = ON ]; then
  layout+=(
    usr/bin/paddock
    usr/share/doc/paddock/copyright
    usr/share/applications/dev.paddock.Paddock.desktop
    usr/share/metainfo/dev.paddock.Paddock.metainfo.xml
    usr/share/icons/hicolor/scalable/apps/dev.paddock.Paddock.svg
    usr/share/icons/hicolor/64x64/apps/dev.paddock.Paddock.png
    usr/share/icons/hicolor/128x128/apps/dev.paddock.Paddock.png
    usr/share/icons/hicolor/256x256/apps/dev.paddock.Paddock.png
  )
fi
for f in "${layout[@]}"; do
  [ -f "$root/$f" ] || fail "/$f is not installed (installed: $(cd "$root" && find usr -type f | sort | tr '\n' ' '))"
done
[ -x "$root/usr/bin/paddock-pool" ] && [ -x "$root/usr/libexec/paddock/paddock-sandbox-init" ] \
  || fail "the pool's binaries are not executable"
# The init lives in libexec only: the installed pool must find it there, not next to itself.
[ ! -e "$root/usr/bin/paddock-sandbox-init" ] || fail "paddock-sandbox-init is installed in /usr/bin"
for f in usr/bin/paddockd usr/bin/paddock-pool usr/libexec/paddock/paddock-sandbox-init; do
  readelf -S "$root/$f" | grep -q '\.debug_info' && fail "/$f is not stripped"
done
grep -qx 'ExecStart=/usr/bin/paddockd' "$root/usr/lib/systemd/user/paddockd.service" \
  || fail "paddockd.service does not start /usr/bin/paddockd: $(grep ExecStart "$root/usr/lib/systemd/user/paddockd.service")"
grep -qx 'ExecStart=/usr/bin/paddock-pool' "$root/usr/lib/systemd/user/paddock-pool.service" \
  || fail "the user paddock-pool.service does not start /usr/bin/paddock-pool"
grep -q '^ExecStart=/usr/bin/paddock-pool --config /etc/paddock/pool.toml' "$root/usr/lib/systemd/system/paddock-pool.service" \
  || fail "the system paddock-pool.service does not start /usr/bin/paddock-pool with /etc/paddock/pool.toml"
echo "installed into a throwaway root: ${packages[*]}; layout, stripping and units as expected"

# systemd's own check of the units (unknown keys, bad values, missing ExecStart binary). It looks
# for the binaries on this machine, so the copies checked point into the throwaway root.
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$tmp/units/user" "$tmp/units/system" "$tmp/units/run"
  chmod 700 "$tmp/units/run"
  for kind in user system; do
    for unit in "$root/usr/lib/systemd/$kind"/*.service; do
      sed "s|/usr/bin/|$root/usr/bin/|g" "$unit" >"$tmp/units/$kind/$(basename "$unit")"
    done
  done
  out=$(XDG_RUNTIME_DIR=$tmp/units/run systemd-analyze verify --user "$tmp/units/user"/*.service 2>&1) && [ -z "$out" ] \
    || fail "systemd-analyze verify --user on the user units: $out"
  out=$(systemd-analyze verify "$tmp/units/system"/*.service 2>&1) && [ -z "$out" ] \
    || fail "systemd-analyze verify on the system unit: $out"
  echo "systemd-analyze verify: the user and system units are clean"
else
  echo "systemd-analyze is not installed: the units' own check is skipped"
fi

# --- run the installed programs ---------------------------------------------------------------
# A home of their own: no user config, database or socket of this machine is read or written.
home=$tmp/home
mkdir -p "$home" "$tmp/run"
chmod 700 "$tmp/run"
export HOME=$home XDG_CONFIG_HOME=$home/.config XDG_DATA_HOME=$home/.local/share XDG_RUNTIME_DIR=$tmp/run
bin=$root/usr/bin

out=$("$bin/paddockctl" --version 2>&1) || fail "paddockctl --version exited $?: $out"
[[ "$out" == *"$version"* ]] || fail "paddockctl --version printed '$out', not the version $version"
echo "paddockctl --version: $out"
if [ "$with_console" = ON ]; then
  out=$(QT_QPA_PLATFORM=offscreen "$bin/paddock" --version 2>&1) || fail "paddock --version exited $?: $out"
  [[ "$out" == *"$version"* ]] || fail "paddock --version printed '$out', not the version $version"
  echo "paddock --version: $(grep -m1 "$version" <<<"$out")"
fi

out=$("$bin/paddockd" --check-config 2>&1) || fail "paddockd --check-config (embedded default) exited $?: $out"
echo "paddockd --check-config: $out"
examples=$root/usr/share/paddock/examples
out=$("$bin/paddockd" --check-config --config "$examples/broker.toml" 2>&1) \
  || fail "paddockd --check-config with the shipped example broker.toml exited $?: $out"
out=$("$bin/paddock-pool" --check-config --config "$examples/pool.toml" 2>&1) \
  || fail "paddock-pool --check-config with the shipped example pool.toml exited $?: $out"
echo "the shipped examples pass --check-config: broker.toml (with policy.toml) and pool.toml"

printf 'workers = "many"\n' >"$tmp/broken.toml"
out=$("$bin/paddockd" --check-config --config "$tmp/broken.toml" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "paddockd --check-config accepted a config with workers = \"many\": $out"
[[ "$out" == *workers* ]] || fail "paddockd --check-config on a broken config did not name the key 'workers': $out"
echo "paddockd --check-config on a broken config: exit $rc, names 'workers'"

# The pool: installed binary, its own config and state under the throwaway root, a free port
# chosen by the kernel, no warm sandboxes and no disk-limit image (cheap to start).
cat >"$tmp/pool.toml" <<EOF
pool_id = "$pool_id"

[[tier]]
name = "lite"
runtime = "bwrap"
warm_count = 0
max_count = 2
disk_mb = 0
EOF
"$bin/paddock-pool" --config "$tmp/pool.toml" --listen 127.0.0.1:0 --state-dir "$root/var/lib/paddock/pool" \
  >"$tmp/pool.log" 2>&1 &
pool_pid=$!
line=''
for _ in $(seq 1 200); do
  line=$(grep -m1 ' listening on ' "$tmp/pool.log") && break
  kill -0 "$pool_pid" 2>/dev/null || { cat "$tmp/pool.log" >&2; fail "the installed paddock-pool exited at start (log above)"; }
  sleep 0.05
done
[ -n "$line" ] || { cat "$tmp/pool.log" >&2; fail "the installed paddock-pool did not say where it listens (log above)"; }
[[ "$line" == *"init $root/usr/libexec/paddock/paddock-sandbox-init"* ]] \
  || fail "the installed paddock-pool does not use the installed init: $line"
port=$(sed -n 's/.*(port \([0-9]*\),.*/\1/p' <<<"$line")
[ -n "$port" ] || fail "no port in the pool's line: $line"
echo "installed paddock-pool on 127.0.0.1:$port uses $root/usr/libexec/paddock/paddock-sandbox-init"

if ! command -v bwrap >/dev/null || ! bwrap --ro-bind / / --unshare-all true 2>/dev/null; then
  echo "bubblewrap cannot make sandboxes here: the playbook run through the installed programs is skipped"
  exit 0
fi

# The broker: installed binary; a playbook that only the installed share/paddock/playbooks has.
cat >"$root/usr/share/paddock/playbooks/package-test-probe.toml" <<'EOF'
name = "package-test-probe"
goal = "Check that PID 1 of the sandbox is paddock-sandbox-init"

[[step]]
tool = "run_command"
command = "tr '\\0' ' ' < /proc/1/cmdline; echo"
expect_stdout = "paddock-sandbox-init"

[[step]]
tool = "finish"
summary = "PID 1 is the sandbox init"
EOF
socket=$tmp/run/broker.sock
cat >"$tmp/broker.toml" <<EOF
data_dir = "data"
socket = "$socket"
allow_local_execution = true
workers = 2

[[pool]]
name = "local"
endpoint = "127.0.0.1:$port"
EOF
"$bin/paddockd" --config "$tmp/broker.toml" >"$tmp/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 200); do
  [ -S "$socket" ] && "$bin/paddockctl" --broker "unix:$socket" --timeout 2 pools >/dev/null 2>&1 && break
  kill -0 "$broker_pid" 2>/dev/null || { cat "$tmp/broker.log" >&2; fail "the installed paddockd exited at start (log above)"; }
  sleep 0.05
done
if ! out=$(cd "$tmp" && "$bin/paddockctl" --broker "unix:$socket" --timeout 60 submit --playbook package-test-probe -f 2>&1); then
  echo "$out" >&2
  echo "--- broker log" >&2; tail -n 40 "$tmp/broker.log" >&2
  echo "--- pool log" >&2; tail -n 40 "$tmp/pool.log" >&2
  fail "the playbook did not succeed through the installed paddockd, paddock-pool and paddock-sandbox-init"
fi
echo "the installed broker ran the installed playbook package-test-probe in a sandbox of the installed pool"
echo "$out" | tail -n 1
exit 0
